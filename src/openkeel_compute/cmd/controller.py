"""``openkeel-compute controller``: keep KubeVirt instancetypes/preferences in step with the catalogue.

    openkeel-compute controller [--kubeconfig FILE | --render DIR] [--once]
    openkeel-compute controller status [ID]      (also ``openkeel-compute flavor status [ID]``)
"""

from __future__ import annotations

import argparse
import sys

from openkeel_compute.cmd.common import add_config_args, load_conf


def _add_target_args(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--kubeconfig", metavar="FILE", help="cluster to use (default: [controller] kubeconfig)")
    target.add_argument("--render", metavar="DIR",
                        help="no cluster: keep one YAML file per object in DIR (default without a kubeconfig: "
                             "[controller] render_dir)")


def register(subparsers) -> None:
    parser = subparsers.add_parser("controller", help="reconcile flavors into KubeVirt objects",
                                   description=__doc__.splitlines()[0])
    add_config_args(parser)
    _add_target_args(parser)
    parser.add_argument("--once", action="store_true",
                        help="one full resync plus the pending outbox, then exit (1 if something stayed out of sync)")
    parser.set_defaults(func=_run)
    group = parser.add_subparsers(dest="controller_command", metavar="SUBCOMMAND")
    status = group.add_parser("status", help="are each flavor's objects in sync, and why not")
    _setup_status(status)

    from openkeel_compute.cmd import flavor

    if hasattr(flavor, "add_flavor_subcommand") and "status" not in getattr(flavor, "FLAVOR_SUBCOMMANDS", {}):
        flavor.add_flavor_subcommand("status", "are each flavor's KubeVirt objects in sync, and why not",
                                     _setup_status, _status)


def _setup_status(parser: argparse.ArgumentParser) -> None:
    if not any(a.dest == "config_file" for a in parser._actions):
        add_config_args(parser)
    _add_target_args(parser)
    parser.add_argument("id", nargs="?", metavar="ID", help="one flavor id (default: every flavor)")
    parser.set_defaults(func=_status)


def _run(args) -> int:
    from openkeel_compute.controller import service

    conf = load_conf(args)
    if args.kubeconfig or args.render or conf.controller.kubeconfig:
        return service.run(conf, kubeconfig=args.kubeconfig, render_dir=args.render, once=args.once)
    if conf.controller.driver == "kubernetes":
        sys.stderr.write("openkeel-compute controller: [controller] driver = kubernetes needs a kubeconfig "
                         "([controller] kubeconfig or --kubeconfig)\n")
        return 2
    from openkeel_compute.emulator.service import emulated_cluster

    with emulated_cluster(conf) as kubeconfig:
        return service.run(conf, kubeconfig=kubeconfig, once=args.once)


def _status(args) -> int:
    from openkeel_compute.conf.kubevirt import mapping_options
    from openkeel_compute.controller.service import build_backend
    from openkeel_compute.controller.status import flavor_statuses, format_table
    from openkeel_compute.db.api import get_engine

    conf = load_conf(args)
    backend, _client = build_backend(conf, getattr(args, "kubeconfig", None), getattr(args, "render", None))
    try:
        statuses = flavor_statuses(get_engine(conf), backend, mapping_options(conf),
                                   conf.controller.create_namespaces, args.id)
    finally:
        backend.close()
    sys.stdout.write(format_table(statuses))
    return 0 if all(s.in_sync for s in statuses) else 1
