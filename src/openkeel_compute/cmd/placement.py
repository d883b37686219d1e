"""``openkeel-compute placement audit [--dry-run]``: Placement's allocations against the servers.

Gives back the allocations of consumers that are neither live servers nor migrations under way, and
claims again the resources of servers on a node that hold none (controller/audit.py), printing one
line per repair; ``--dry-run`` prints what it would do. Exit status 0 when everything was repaired (or
nothing needed it), 1 when something could not be.
"""

from __future__ import annotations

from openkeel_compute.cmd.common import (
    OperatorError,
    add_config_args,
    load_conf,
    open_database,
    refusing_missing_database,
)


def register(subparsers) -> None:
    parser = subparsers.add_parser("placement", help="Placement's allocations")
    sub = parser.add_subparsers(dest="placement_command", metavar="ACTION")
    audit = sub.add_parser("audit", help="compare Placement's allocations with the servers and repair them")
    add_config_args(audit)
    audit.add_argument("--dry-run", action="store_true", help="only say what would be repaired")
    audit.set_defaults(func=refusing_missing_database(_audit))
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _audit(args) -> int:
    from openkeel_compute.controller import audit
    from openkeel_compute.placement import errors
    from openkeel_compute.placement.client import PlacementClient

    conf = load_conf(args)
    engine = open_database(conf)
    try:
        report = audit.audit(engine, PlacementClient.from_conf(conf), dry_run=args.dry_run)
    except errors.PlacementError as exc:
        raise OperatorError(exc.message) from None
    for line in report.lines():
        print(line)
    return 1 if report.failed else 0
