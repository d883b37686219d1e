"""``openkeel-compute controller``: keep KubeVirt instancetypes/preferences in step with the catalogue.

    openkeel-compute controller [--kubeconfig FILE | --render DIR] [--once]
    openkeel-compute controller status [ID]      (also ``openkeel-compute flavor status [ID]``)
"""

from __future__ import annotations

import argparse
import sys

from openkeel_compute.cmd.common import add_config_args, load_conf, open_database, refusing_missing_database


def _add_target_args(parser: argparse.ArgumentParser, default=None) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--kubeconfig", metavar="FILE", default=default,
                        help="cluster to use (default: [controller] kubeconfig)")
    target.add_argument("--render", metavar="DIR", default=default,
                        help="no cluster: keep one YAML file per object in DIR (default without a kubeconfig: "
                             "[controller] render_dir)")


def register(subparsers) -> None:
    parser = subparsers.add_parser("controller", help="reconcile flavors into KubeVirt objects",
                                   description="Keep KubeVirt instancetypes and preferences in step with "
                                               "the flavor catalogue.")
    add_config_args(parser)
    _add_target_args(parser)
    parser.add_argument("--once", action="store_true",
                        help="one full resync plus the pending outbox, then exit (1 if something stayed out of sync)")
    parser.set_defaults(func=refusing_missing_database(_run))
    group = parser.add_subparsers(dest="controller_command", metavar="SUBCOMMAND")
    status = group.add_parser("status", help="are each flavor's objects in sync, and why not")
    # `controller --render DIR status`: the options given before "status" hold, so the status
    # parser must not overwrite them with its own defaults.
    add_config_args(status, default=argparse.SUPPRESS)
    _add_target_args(status, default=argparse.SUPPRESS)
    status.add_argument("id", nargs="?", metavar="ID", help="one flavor id (default: every flavor)")
    status.set_defaults(func=refusing_missing_database(_status))

    from openkeel_compute.cmd import flavor

    if hasattr(flavor, "add_flavor_subcommand") and "status" not in getattr(flavor, "FLAVOR_SUBCOMMANDS", {}):
        flavor.add_flavor_subcommand("status", "are each flavor's KubeVirt objects in sync, and why not",
                                     _setup_status, refusing_missing_database(_status))


def _setup_status(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser)
    _add_target_args(parser)
    parser.add_argument("id", nargs="?", metavar="ID", help="one flavor id (default: every flavor)")


def _run(args) -> int:
    from openkeel_compute.controller import service

    conf = load_conf(args)
    open_database(conf)  # says which database, refuses a missing SQLite file
    return service.run(conf, kubeconfig=args.kubeconfig, render_dir=args.render, once=args.once)


def _status(args) -> int:
    from openkeel_compute.conf.kubevirt import mapping_options
    from openkeel_compute.controller.service import build_backend
    from openkeel_compute.controller.status import flavor_statuses, format_table

    args.config_file = getattr(args, "config_file", [])
    conf = load_conf(args)
    engine = open_database(conf)
    backend, _client = build_backend(conf, getattr(args, "kubeconfig", None), getattr(args, "render", None))
    try:
        statuses = flavor_statuses(engine, backend, mapping_options(conf),
                                   conf.controller.create_namespaces, args.id)
    finally:
        backend.close()
    if args.id is not None and all(not s.exists and s.in_sync for s in statuses):
        print(f"error: no flavor {args.id}: not in the catalogue, and no KubeVirt objects of it", file=sys.stderr)
        return 1
    sys.stdout.write(format_table(statuses))
    return 0 if all(s.in_sync for s in statuses) else 1
