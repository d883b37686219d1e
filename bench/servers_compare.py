#!/usr/bin/env python3
"""Servers: OpenKeel compute vs Nova 34.0.0's servers oracle, side by side in one run (run by hand).

Nova: the team's servers oracle (nova-api, conductor, scheduler, fake computes, Placement and the
Neutron/Glance fixtures in one process; instance quotas lifted). OpenKeel: the API as ``serve`` runs
it (granian, one worker), the controller with its built-in KubeVirt cluster (``[controller] driver =
emulated``, the cluster's realistic phase durations unless --delay-scale says otherwise) and the
local image service, on one SQLite database. Everything a system runs is pinned to the server core;
wrk and this script use the other one.

1. Each system gets ``--servers`` servers (default 200) through POST /servers in batches (min_count =
   max_count = --batch), and the time until all are ACTIVE is taken (Nova's build rate is measured here).
2. wrk, alternating Nova and OpenKeel: GET /servers/detail @2.96 and @2.1, GET /servers @2.96, and
   POST /servers @2.96 (one new server per request; afterwards the run's servers are deleted).
   Per run: req/s, p50/p99 and the CPU time of the system's processes per request (from /proc).
3. A fresh OpenKeel (new database and cluster) boots ``--boot`` servers (default 1,000) through the API,
   in batches, and the time from the first POST until every one is ACTIVE is taken.

Prints a markdown report with the ratios (OpenKeel / Nova) and the load average at each measurement.
Never asserts: speed is measured, not asserted.

  bench/servers_compare.py                              # ~10 minutes
  bench/servers_compare.py --servers 50 --duration 5 --boot 200 --ops index,create   # a quick look
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = ROOT / ".venv"

if Path(sys.prefix).resolve() != VENV.resolve() and not os.environ.get("OPENKEEL_BENCH_REEXEC"):
    os.environ["OPENKEEL_BENCH_REEXEC"] = "1"
    os.execv(str(VENV / "bin/python"), [str(VENV / "bin/python"), str(Path(__file__).resolve()), *sys.argv[1:]])

sys.path.insert(0, str(HERE))
from proctree import tree_cpu

ORACLE = Path(os.environ.get("NOVA_SERVERS_ORACLE_SCRIPT",
                             ROOT.parent / "shared/nova-oracle/run-servers-oracle.sh"))
ADMIN = "admin:admin"
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"  # an image of Nova's Glance fixture; registered alike locally
FLAVOR = "1"  # m1.tiny in Nova's fixture; created alike in OpenKeel
OPS = {  # name: (title, method script, path, microversion)
    "detail": ("GET /servers/detail @2.96", "get.lua", "/v2.1/servers/detail", "2.96"),
    "detail21": ("GET /servers/detail @2.1", "get.lua", "/v2.1/servers/detail", "2.1"),
    "index": ("GET /servers @2.96", "get.lua", "/v2.1/servers", "2.96"),
    "create": ("POST /servers @2.96 (one server each)", "boot.lua", "/v2.1/servers", "2.96"),
}
TARGETS = {"detail": 20, "detail21": 20, "index": 20, "create": 10}


def log(msg: str) -> None:
    print(f"[servers {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ---------------------------------------------------------------- processes

def pin(core: str | None) -> list[str]:
    return ["taskset", "-c", core] if core is not None else []


class Proc:
    """A child in its own session, stopped with its whole process group."""

    def __init__(self, name: str, argv: list[str], logfile: Path, env: dict | None = None):
        self.name = name
        with open(logfile, "ab") as out:
            self.proc = subprocess.Popen(argv, env=env or dict(os.environ), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


class Api:
    """A keep-alive JSON client for one system's compute API."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def call(self, method: str, path: str, body=None, mv: str = "2.96"):
        headers = {"X-Auth-Token": ADMIN, "OpenStack-API-Version": f"compute {mv}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, data, headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                return resp.status, (json.loads(raw) if raw else None)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionRefusedError):
                self.conn.close()
                if attempt == 2:
                    raise
        raise AssertionError

    def wait_up(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.call("GET", "/v2.1/flavors")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"no answer on :{self.port} within {timeout} s")

    def count(self, status: str, name: str | None = None) -> int:
        path = f"/v2.1/servers?status={status}&limit=1000" + (f"&name={name}" if name else "")
        code, body = self.call("GET", path)
        if code != 200:
            raise RuntimeError(f"GET {path}: {code} {body}")
        return len(body["servers"])

    def boot(self, total: int, batch: int, name: str) -> float:
        """POST ``total`` servers (``batch`` per request); returns the seconds the POSTs took."""
        t0 = time.monotonic()
        left = total
        while left:
            n = min(batch, left)
            code, body = self.call("POST", "/v2.1/servers", {"server": {
                "name": name, "imageRef": IMAGE, "flavorRef": FLAVOR, "networks": "none",
                "min_count": n, "max_count": n}})
            if code != 202:
                raise RuntimeError(f"POST /servers: {code} {body}")
            left -= n
        return time.monotonic() - t0

    def wait_active(self, total: int, name: str, timeout: float, poll: float = 1.0) -> dict:
        """Until ``total`` servers called ``name`` are ACTIVE (or one is ERROR, or the time is up)."""
        t0 = time.monotonic()
        active = errors = 0
        while time.monotonic() - t0 < timeout:
            active = self.count("ACTIVE", name)
            if active >= total:
                break
            errors = self.count("ERROR", name)
            if errors:
                break
            time.sleep(poll)
        return {"active": active, "errors": errors, "seconds": time.monotonic() - t0}

    def delete_named(self, name: str, timeout: float = 300) -> int:
        code, body = self.call("GET", f"/v2.1/servers?name={name}&limit=1000")
        ids = [s["id"] for s in body["servers"]] if code == 200 else []
        for uuid in ids:
            self.call("DELETE", f"/v2.1/servers/{uuid}")
        deadline = time.monotonic() + timeout
        while ids and time.monotonic() < deadline:
            code, body = self.call("GET", f"/v2.1/servers?name={name}&limit=1000")
            if code == 200 and not body["servers"]:
                break
            time.sleep(1)
        return len(ids)


# ---------------------------------------------------------------- the two systems

class Nova:
    name = "nova"

    def __init__(self, port: int, core: str | None, computes: int):
        self.port, self.core, self.computes = port, core, computes
        self.pid: int | None = None

    def start(self) -> None:
        if not ORACLE.exists():
            raise SystemExit(f"the servers oracle is missing ({ORACLE}); set NOVA_SERVERS_ORACLE_SCRIPT")
        args = [str(ORACLE), "start", str(self.port), "--", "--computes", str(self.computes)]
        for flag in ("quota.instances=-1", "quota.cores=-1", "quota.ram=-1"):
            args += ["--flag", flag]
        out = subprocess.run(args, capture_output=True, text=True, check=True)
        self.pid = int(out.stdout.strip().splitlines()[-1])
        if self.core is not None:  # every thread of the process
            subprocess.run(["taskset", "-a", "-p", "-c", self.core, str(self.pid)], capture_output=True, check=True)
        Api(self.port).wait_up()

    def pids(self) -> list[int]:
        return [self.pid] if self.pid else []

    def stop(self) -> None:
        if self.pid is not None:
            subprocess.run([str(ORACLE), "stop", str(self.port)], capture_output=True, check=False)
            self.pid = None


class OpenKeel:
    name = "openkeel"

    def __init__(self, work: Path, ports: tuple[int, int, int], core: str | None, delay_scale: float,
                 database: str | None, poll_interval: float | None, nodes: int = 1, cluster_apart: bool = False):
        self.work, self.core, self.nodes, self.cluster_apart = work, core, nodes, cluster_apart
        self.port, self.image_port, self.cluster_port = ports
        self.delay_scale, self.database, self.poll_interval = delay_scale, database, poll_interval
        self.procs: list[Proc] = []

    def start(self) -> None:
        w = self.work
        w.mkdir(parents=True, exist_ok=True)
        py, okc = str(VENV / "bin/python"), str(VENV / "bin/openkeel-compute")
        images = w / "images"
        disk = w / "disk.raw"
        disk.write_bytes(b"\0" * 1024 * 1024)
        subprocess.run([py, "-m", "openkeel_compute.images.local", "register", "--dir", str(images), str(disk),
                        "--name", "cirros", "--id", IMAGE, "--copy"], check=True, capture_output=True)
        database = self.database or f"sqlite:///{w}/openkeel.sqlite"
        conf = w / "openkeel.conf"
        conf.write_text(
            f"[DEFAULT]\nstate_path = {w}\n[api]\nauth_strategy = noauth2\n[database]\nconnection = {database}\n"
            f"[wsgi]\nworkers = 1\n[quota]\ninstances = -1\ncores = -1\nram = -1\n[glance]\napi_servers = http://127.0.0.1:{self.image_port}\n"
            f"[controller]\nmetrics_port = 0\nemulator_port = {self.cluster_port}\n"
            f"emulator_delay_scale = {self.delay_scale}\nemulator_nodes = {self.nodes}\n"
            + (f"poll_interval = {self.poll_interval}\n" if self.poll_interval else "")
            # the built-in cluster brings the embedded Placement; a kubeconfig's cluster asks for it
            + ("[placement_service]\nembedded = true\n" if self.cluster_apart else ""))
        subprocess.run([okc, "db", "sync", "--config-file", str(conf)], check=True, capture_output=True)
        target: list[str] = []
        if self.cluster_apart:  # this tree's built-in cluster in its own process, whichever tree's controller
            kubeconfig = w / "cluster.kubeconfig"
            env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
            self.procs.append(Proc("cluster", pin(self.core) + [
                py, str(HERE / "cluster_apart.py"), "--port", str(self.cluster_port), "--nodes", str(self.nodes),
                "--scale", str(self.delay_scale), "--kubeconfig", str(kubeconfig)], w / "cluster.log", env=env))
            deadline = time.monotonic() + 60
            while not kubeconfig.exists():
                if time.monotonic() > deadline or not self.procs[-1].alive():
                    raise RuntimeError(f"the cluster apart did not start; see {w}/cluster.log")
                time.sleep(0.1)
            target = ["--kubeconfig", str(kubeconfig)]
        self.procs.append(Proc("images", pin(self.core) + [py, "-m", "openkeel_compute.images.local", "serve",
                                                           "--dir", str(images), "--port", str(self.image_port)],
                               w / "images.log"))
        self.procs.append(Proc("api", pin(self.core) + [okc, "serve", "--config-file", str(conf),
                                                        "--port", str(self.port)], w / "api.log"))
        self.procs.append(Proc("controller", pin(self.core) + [okc, "controller", "--config-file", str(conf),
                                                               *target], w / "controller.log"))
        api = Api(self.port)
        api.wait_up()
        code, body = api.call("POST", "/v2.1/flavors", {"flavor": {
            "name": "m1.tiny", "id": FLAVOR, "ram": 512, "vcpus": 1, "disk": 1}}, mv="2.1")
        if code != 200:
            raise RuntimeError(f"creating flavor {FLAVOR}: {code} {body}")
        for p in self.procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited; see {w}/{p.name}.log")

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.procs.clear()


# ---------------------------------------------------------------- wrk

def wrk(system, op: str, seconds: float, conns: int, core: str | None, run: str) -> dict:
    _, script, path, mv = OPS[op]
    env = dict(os.environ, BENCH_DIR=str(HERE), BENCH_TOKEN=ADMIN, BENCH_MV=mv, BENCH_RUN=run,
               BENCH_IMAGE=IMAGE, BENCH_FLAVOR=FLAVOR)
    argv = pin(core) + ["wrk", "-t", str(conns), "-c", str(conns), "-d", f"{seconds}s", "--timeout", "60s",
                        "-s", str(HERE / script), f"http://127.0.0.1:{system.port}{path}"]
    pids = system.pids()
    cpu0 = tree_cpu(*pids)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 120, check=False)
    cpu1 = tree_cpu(*pids)
    if op != "create":  # a request cut off by wrk's deadline may still run: let it finish
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.3)
            now = tree_cpu(*pids)
            if now - cpu1 < 0.02:
                break
            cpu1 = now
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCHJSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
    r = json.loads(line.split(" ", 1)[1])
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6) if r["duration_us"] else 0.0
    r["cpu_ms_per_req"] = 1000 * (cpu1 - cpu0) / r["requests"] if r["requests"] else float("nan")
    r["errors"] = sum(r[k] for k in ("err_connect", "err_read", "err_write", "err_status", "err_timeout"))
    r["load"] = load()
    return r


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


# ---------------------------------------------------------------- main

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--servers", type=int, default=200, help="servers each system holds during the reads")
    p.add_argument("--batch", type=int, default=20, help="servers per POST (min_count = max_count) when seeding")
    p.add_argument("--boot", type=int, default=1000, help="servers a fresh OpenKeel boots to ACTIVE (0: skip)")
    p.add_argument("--boot-batch", type=int, default=100, help="servers per POST for --boot")
    p.add_argument("--boot-timeout", type=float, default=600)
    p.add_argument("--ops", default=",".join(OPS), help="comma list of " + ",".join(OPS))
    p.add_argument("--duration", type=int, default=10, help="seconds per measured run (POST, GET /servers)")
    p.add_argument("--list-duration", type=int, default=20, help="seconds per measured run of /servers/detail")
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--list-connections", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1, help="measured runs per system and operation (median kept)")
    p.add_argument("--server-core", default="1" if (os.cpu_count() or 1) > 1 else None)
    p.add_argument("--client-core", default="0" if (os.cpu_count() or 1) > 1 else None)
    p.add_argument("--nova-port", type=int, default=37020)
    p.add_argument("--nova-computes", type=int, default=10)
    p.add_argument("--ports", default="37101,37102,37103", help="OpenKeel API, image service, built-in cluster")
    p.add_argument("--delay-scale", type=float, default=1.0,
                   help="the built-in cluster's phase durations (1.0: image import ~12 s, VM start ~5 s)")
    p.add_argument("--cluster-nodes", type=int, default=20,
                   help="nodes of the built-in cluster ([controller] emulator_nodes); each holds 64 of the "
                        "benchmark's one-vCPU servers in Placement (16 CPUs at the allocation ratio 4.0)")
    p.add_argument("--cluster-apart", action="store_true",
                   help="--boot's built-in cluster in a process of its own (bench/cluster_apart.py, always this "
                        "tree's), the controller given its kubeconfig: the controller's CPU seconds are then "
                        "its own, not the cluster's")
    p.add_argument("--poll-interval", type=float, help="[controller] poll_interval (default: its own)")
    p.add_argument("--openkeel-db", help="OpenKeel's database URL (default: a new SQLite file)")
    p.add_argument("--skip-nova", action="store_true", help="OpenKeel only (no ratios)")
    p.add_argument("--markdown", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    if unknown := [o for o in ops if o not in OPS]:
        p.error(f"unknown operation(s) {unknown}")
    if not shutil.which("wrk"):
        p.error("wrk is missing: apt-get update && apt-get install -y wrk")
    ports = tuple(int(x) for x in args.ports.split(","))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    work = Path(tempfile.mkdtemp(prefix="openkeel-servers-bench-"))
    systems: list = []
    result: dict = {"ops": {}, "seed": {}, "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    try:
        ok = OpenKeel(work / "openkeel", ports, args.server_core, args.delay_scale, args.openkeel_db,
                      args.poll_interval, args.cluster_nodes)
        systems = [ok] if args.skip_nova else [Nova(args.nova_port, args.server_core, args.nova_computes), ok]
        for s in systems:
            s.start()
            log(f"{s.name} up on :{s.port} (load {load()})")
        # 1. the servers the reads list, and each system's build rate
        for s in systems if args.servers else []:
            api = Api(s.port)
            posted = api.boot(args.servers, args.batch, "bench-base")
            got = api.wait_active(args.servers, "bench-base", args.boot_timeout)
            got.update(posts_s=posted, load=load(), rate=got["active"] / got["seconds"])
            result["seed"][s.name] = got
            log(f"{s.name}: {args.servers} servers posted in {posted:.1f} s, {got['active']} ACTIVE "
                f"({got['errors']} ERROR) {got['seconds']:.1f} s after the first POST: {got['rate']:.2f} servers/s "
                f"(load {got['load']})")
            if got["active"] < args.servers:
                raise RuntimeError(f"{s.name}: only {got['active']} of {args.servers} servers became ACTIVE")
        # 2. wrk, alternating
        for i, op in enumerate(ops):
            order = systems if i % 2 == 0 else systems[::-1]
            runs: dict[str, list[dict]] = {s.name: [] for s in systems}
            lists = op in ("detail", "detail21")
            conns = args.list_connections if lists else args.connections
            secs = args.list_duration if lists else args.duration
            for rep in range(args.repeat):
                for s in order if rep % 2 == 0 else order[::-1]:
                    if args.warmup and op != "create":
                        wrk(s, op, args.warmup, conns, args.client_core, f"w{rep}")
                    r = wrk(s, op, secs, conns, args.client_core, f"{rep}{s.name[0]}")
                    runs[s.name].append(r)
                    log(f"{OPS[op][0]:38s} {s.name:9s} {r['rps']:9.1f} req/s  p50 {r['p50_us'] / 1000:8.2f} ms  "
                        f"p99 {r['p99_us'] / 1000:8.2f} ms  cpu {r['cpu_ms_per_req']:8.3f} ms/req  "
                        f"errors {r['errors']}  load {r['load']}")
                    if op == "create":
                        gone = Api(s.port).delete_named(f"bench-post-{rep}{s.name[0]}")
                        log(f"{s.name}: deleted the {gone} servers of the POST run (load {load()})")
            result["ops"][op] = {name: sorted(rs, key=lambda r: r["rps"])[len(rs) // 2] for name, rs in runs.items()}
        for s in systems:
            s.stop()
        # 3. a fresh OpenKeel boots --boot servers
        if args.boot:
            fresh = OpenKeel(work / "openkeel-boot", ports, args.server_core, args.delay_scale, None,
                             args.poll_interval, args.cluster_nodes, args.cluster_apart)
            systems.append(fresh)
            fresh.start()
            api = Api(fresh.port)
            log(f"fresh openkeel: booting {args.boot} servers (load {load()})")
            cpu0 = {p.name: tree_cpu(p.pid) for p in fresh.procs}
            posted = api.boot(args.boot, args.boot_batch, "bench-boot")
            got = api.wait_active(args.boot, "bench-boot", args.boot_timeout)
            got.update(posts_s=posted, load=load(), rate=got["active"] / got["seconds"],
                       cpu_s={p.name: round(tree_cpu(p.pid) - cpu0[p.name], 1) for p in fresh.procs})
            result["boot"] = got
            log(f"openkeel: {args.boot} servers posted in {posted:.1f} s, {got['active']} ACTIVE "
                f"({got['errors']} ERROR) {got['seconds']:.1f} s after the first POST (load {got['load']}; "
                f"CPU s {got['cpu_s']})")
            fresh.stop()
    finally:
        for s in systems:
            s.stop()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report = render(result, args, ops)
    print(report)
    if args.markdown:
        args.markdown.write_text(report)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


def render(result: dict, args, ops: list[str]) -> str:
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    shown, skip = [], False  # the command line without the output files (paths of this machine)
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in ("--markdown", "--json"):
            skip = True
        elif not arg.startswith(("--markdown=", "--json=")):
            shown.append(arg)
    lines = [f"Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}  ",
             f"Machine: nproc={os.cpu_count()}, CPU: {cpu}, {platform.platform()}  ",
             f"Command: `bench/servers_compare.py {' '.join(shown)}`  ",
             (f"Each system's processes pinned to core {args.server_core}, wrk to core {args.client_core}; "
             f"{args.servers} servers per system; lists: {args.list_connections} connection(s), "
             f"{args.list_duration} s; others: {args.connections} connections, {args.duration} s; "
             f"{args.warmup} s warm-up; built-in cluster delay scale {args.delay_scale:g}, {args.cluster_nodes} nodes."), ""]
    names = list(result["seed"])
    both = "nova" in names and "openkeel" in names
    lines.append("| operation | Nova req/s | OpenKeel req/s | ratio | target | Nova p50 / p99 ms | OpenKeel p50 / p99 ms "
                 "| Nova CPU ms/req | OpenKeel CPU ms/req | errors N/OK | load (1/5/15 min) N; OK |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for op in ops:
        by = result["ops"].get(op)
        if not by:
            continue
        n = by.get("nova")
        o = by["openkeel"]
        if n:
            verdict = "PASS" if ratio(o["rps"], n["rps"]) >= TARGETS[op] else "**FAIL**"
            lines.append(
                f"| {OPS[op][0]} | {n['rps']:.2f} | {o['rps']:.1f} | **{ratio(o['rps'], n['rps']):.1f}x** | "
                f">= {TARGETS[op]}x {verdict} | {n['p50_us'] / 1000:.1f} / {n['p99_us'] / 1000:.1f} | "
                f"{o['p50_us'] / 1000:.2f} / {o['p99_us'] / 1000:.2f} | {n['cpu_ms_per_req']:.1f} | "
                f"{o['cpu_ms_per_req']:.2f} | {n['errors']}/{o['errors']} | {n['load']}; {o['load']} |")
        else:
            lines.append(f"| {OPS[op][0]} | – | {o['rps']:.1f} | – | – | – | {o['p50_us'] / 1000:.2f} / "
                         f"{o['p99_us'] / 1000:.2f} | – | {o['cpu_ms_per_req']:.2f} | –/{o['errors']} | {o['load']} |")
    lines.append("")
    for name in names:
        s = result["seed"][name]
        lines.append(f"- {args.servers} servers to ACTIVE ({args.batch} per POST), {name}: {s['seconds']:.1f} s "
                     f"({s['rate']:.2f} servers/s; POSTs took {s['posts_s']:.1f} s; load {s['load']})")
    if both:
        rn, ro = result["seed"]["nova"]["rate"], result["seed"]["openkeel"]["rate"]
        lines.append(f"- build rate OpenKeel / Nova: {ratio(ro, rn):.1f}x")
    if "boot" in result:
        b = result["boot"]
        verdict = "PASS" if b["active"] >= args.boot and b["seconds"] <= 60 else "**FAIL**"
        lines.append(f"- fresh OpenKeel, {args.boot} servers ({args.boot_batch} per POST) to ACTIVE: "
                     f"{b['active']} ACTIVE, {b['errors']} ERROR after {b['seconds']:.1f} s "
                     f"({b['rate']:.1f} servers/s; POSTs took {b['posts_s']:.1f} s; CPU seconds used meanwhile: "
                     f"{', '.join(f'{k} {v}' for k, v in b['cpu_s'].items())}; load {b['load']}); "
                     f"target 1,000 within 60 s: {verdict}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
