#!/usr/bin/env python3
"""The long reliability runs, by hand: one summary line per area, to read at a glance and compare
between runs (docs/reliability.md keeps the figures of one run).

  tools/reliability.py [--areas fuzz,fuzz-workers,policy,races,restarts,rabbitmq,soak]
                       [--engines sqlite,postgresql,mariadb]
                       [--requests N] [--seed S] [--race-trials N] [--copies N] [--soak-seconds S]
                       [--port-base P]

Areas:
  fuzz      hostile requests over every route, method, microversion and query parameter (derived
            from the router, so later routes are covered): 5xx and non-Nova faults are failures;
  fuzz-workers  the same fuzzer over HTTP against `openkeel-compute serve` with --workers (2)
            workers, on --port-base+30: 5xx and non-Nova faults are failures; requests the HTTP
            server refuses itself (a control character in a header, a URL beyond its limit)
            are counted apart;
  policy    the persona × operation matrix over every microversion boundary the suite knows: leaks;
  races     N parallel copies of every write on one object, repeated: more than one winner, or
            outbox rows beyond one, are failures;
  restarts  the run's own PostgreSQL and MariaDB (a temporary directory, ports from --port-base)
            stopped and started under write load: lost acknowledged writes, 5xx after the
            restart, recovery time;
  rabbitmq  a RabbitMQ node of the run's own stopped and started under writes with notifications
            on: notifications delivered, dropped (counted by the API's sender) or lost by the
            broker, answers given while the sender could not reach it, recovery (broker back ->
            nothing waiting), slowest answer;
  soak      mixed load for --soak-seconds (600 for the 10-minute soak): process memory after the
            warm-up and at the end.

Uses the machine's PostgreSQL and MariaDB (127.0.0.1, as the tests do, throwaway databases) for
fuzz, policy and races, and only servers of its own for restarts and rabbitmq. Exit status 1
when any area failed.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import signal
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

ALL_AREAS = ("fuzz", "fuzz-workers", "policy", "races", "restarts", "rabbitmq", "soak")
ENGINES = ("sqlite", "postgresql", "mariadb")
SOAK_GROWTH_LIMIT_MIB = 20.0


def _fuzz(engine: str, args) -> bool:
    from tests.reliability import fuzz
    from tests.reliability import world as w

    with w.world_on(engine) as world:
        report = fuzz.run(world.app, seed=args.seed, count=args.requests, restock=world.restock)
    print(report.line(engine), flush=True)
    for probe, status, body in (report.errors + report.bad_faults)[:20]:
        print(f"  {status} {probe.describe()[:300]} -> {body[:200]!r}")
    return not report.errors and not report.bad_faults


def _fuzz_workers(engine: str, args) -> bool:
    from tests.reliability import fuzz
    from tests.reliability import world as w

    with w.world_on(engine) as world, w.served(world, args.port_base + 30, workers=args.workers) as server:
        report = fuzz.run(world.app, seed=args.seed, count=args.requests, restock=world.restock, server=server)
    print(report.line(f"{engine}, {args.workers} workers over HTTP"), flush=True)
    for probe, status, body in (report.errors + report.bad_faults)[:20]:
        print(f"  {status} {probe.describe()[:300]} -> {body[:200]!r}")
    return not report.errors and not report.bad_faults


def _policy(engine: str, args) -> bool:
    from tests.reliability import policy_matrix
    from tests.reliability import world as w

    with w.world_on(engine) as world:
        report = policy_matrix.run(world, versions=("2.0", "2.1", "2.25", "2.26", "2.47", "2.73", "2.75",
                                                    "2.89", "2.90", "2.96", "2.98", "2.100", "2.102", "latest"))
    print(report.line(engine), flush=True)
    for leak in report.leaks[:20]:
        print("  " + leak)
    return not report.leaks


def _races(engine: str, args) -> bool:
    from tests.reliability import races
    from tests.reliability import world as w

    failures = 0
    runs = 0
    with w.world_on(engine) as world:
        for trial in range(args.race_trials):
            for outcome in races.run(world, copies=args.copies):
                runs += 1
                if not outcome.ok:
                    failures += 1
                    print(f"  trial {trial}: {outcome.line()}")
            # the next trial's creates must find their ids free again
            for flavorid in ("race-new", "race-del", "race-acc", "race-rm", "race-spec"):
                w.api(world.app, "DELETE", f"/flavors/{flavorid}")
            w.api(world.app, "DELETE", "/os-keypairs/race-kp", token=w.OWNER)
            w.api(world.app, "DELETE", f"/servers/{w.SERVER}/tags/race-tag", token=w.OWNER)
    print(f"races[{engine}]: scenarios={len(races.races())} trials={args.race_trials} copies={args.copies} "
          f"runs={runs} failures={failures}", flush=True)
    return failures == 0


def _restarts(engine: str, args) -> bool:
    if engine == "sqlite":
        return True  # a file: nothing to stop
    from tests.reliability import restarts

    port = args.port_base + (10 if engine == "postgresql" else 11)
    report = restarts.run(engine, port)
    print(report.line(engine), flush=True)
    return report.lost == 0 and report.errors_after_recovery == 0 and report.recovery_seconds is not None


def _rabbitmq(engine: str, args) -> bool:
    from tests.reliability import rabbit

    if engine != args.engines[0]:
        return True  # the broker does not depend on the database: once
    report = rabbit.run(args.port_base + 20)
    print(report.line(), flush=True)
    return report.ok


def _soak(engine: str, args) -> bool:
    from tests.reliability import soak
    from tests.reliability import world as w

    with w.world_on(engine) as world:
        report = soak.run(world, args.soak_seconds)
    print(report.line(engine), flush=True)
    return report.errors == 0 and report.growth_mib <= SOAK_GROWTH_LIMIT_MIB


RUNNERS = {"fuzz": _fuzz, "fuzz-workers": _fuzz_workers, "policy": _policy, "races": _races, "restarts": _restarts, "rabbitmq": _rabbitmq,
           "soak": _soak}


def _interrupted(signum, _frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--areas", default=",".join(ALL_AREAS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--requests", type=int, default=20000, help="fuzzed requests per engine")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="server workers of the fuzz-workers area")
    parser.add_argument("--race-trials", type=int, default=20)
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--soak-seconds", type=float, default=600.0)
    parser.add_argument("--port-base", type=int, default=35100,
                        help="own database servers on BASE+10 and BASE+11, the own broker on BASE+20, "
                             "the served API of fuzz-workers on BASE+30")
    args = parser.parse_args(argv)
    args.areas = [a for a in args.areas.split(",") if a]
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = [a for a in args.areas if a not in RUNNERS] + [e for e in args.engines if e not in ENGINES]
    if unknown:
        parser.error(f"unknown area or engine: {', '.join(unknown)}")
    logging.disable(logging.CRITICAL)  # the API logs every refused request; the summary lines say it all
    # SIGTERM (a `timeout`, a CI cancel) ends the run like Ctrl-C: the areas' own database servers and
    # RabbitMQ node are stopped and removed on the way out. Without it they outlived the run, and the
    # next run with the same --port-base met them on its ports.
    signal.signal(signal.SIGTERM, _interrupted)
    failed = []
    for area in args.areas:
        for engine in args.engines:
            started = time.monotonic()
            try:
                ok = RUNNERS[area](engine, args)
            except BaseException as exc:  # one area's breakage (or skip) must not hide the others
                if isinstance(exc, KeyboardInterrupt):
                    raise
                print(f"{area}[{engine}]: could not run: {type(exc).__name__}: {exc}", flush=True)
                ok = False
            if not ok:
                failed.append(f"{area}[{engine}]")
            print(f"  ({area}[{engine}] took {time.monotonic() - started:.0f} s)", flush=True)
    print("reliability: " + ("all areas passed" if not failed else "FAILED: " + ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
