"""``openkeel-compute controller``: keep KubeVirt instancetypes/preferences in step with the catalogue.

    openkeel-compute controller [--kubeconfig FILE | --render DIR] [--once]
    openkeel-compute controller status [ID]      (also ``openkeel-compute flavor status [ID]``)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import sys

from openkeel_compute.cmd.common import (
    OperatorError,
    add_config_args,
    load_conf,
    open_database,
    refusing_missing_database,
)

LOG = logging.getLogger(__name__)


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
    from openkeel_compute.api.flavor_checks import check_fields
    from openkeel_compute.controller import service
    from openkeel_compute.placement import client as placement_client

    conf = load_conf(args)
    # Flavors the controller maps are checked as POST /flavors checks them (the mapping never imports the API).
    run = functools.partial(service.run, conf, flavor_check=check_fields)
    has_placement = placement_client.configured(conf)
    if args.kubeconfig or args.render or conf.controller.kubeconfig:
        _check_target(conf, args, retries=conf.controller.max_retries)
        open_database(conf)  # says which database, refuses a missing SQLite file
        if not args.render and not has_placement and not conf.placement_service.embedded:
            raise OperatorError(PLACEMENT_MISSING, status=2)
        if args.render or has_placement:
            return run(kubeconfig=args.kubeconfig, render_dir=args.render, once=args.once)
        with _embedded_placement(conf) as url:
            return run(kubeconfig=args.kubeconfig, once=args.once, placement_url=url)
    if conf.controller.driver == "kubernetes":
        raise OperatorError("[controller] driver = kubernetes needs a kubeconfig ([controller] kubeconfig or "
                            "--kubeconfig)", status=2)
    open_database(conf)
    from openkeel_compute.emulator.service import emulated_cluster

    # The built-in cluster is for development: without [placement], the embedded Placement comes with it.
    with emulated_cluster(conf) as kubeconfig:
        if has_placement:
            return run(kubeconfig=kubeconfig, once=args.once)
        with _embedded_placement(conf) as url:
            return run(kubeconfig=kubeconfig, once=args.once, placement_url=url)


PLACEMENT_MISSING = ("[placement] is not configured: the controller claims every server's resources in Placement; "
                     "set [placement] auth_type and its credentials (auth_url, username, password, project_name, "
                     "user_domain_name, project_domain_name), or [placement_service] embedded = true for "
                     "development")


@contextlib.contextmanager
def _embedded_placement(conf):
    """Placement's own service on a loopback port, its database under $state_path/placement."""
    from openkeel_compute.placement import embedded

    try:
        running = embedded.start(os.path.join(conf.state_path, "placement"))
    except RuntimeError as exc:
        raise OperatorError(str(exc)) from None
    LOG.info("embedded Placement on %s (database in %s)", running.url,
             os.path.join(conf.state_path, "placement"))
    try:
        yield running.url
    finally:
        running.stop()


def _check_target(conf, args, retries: int) -> None:
    """Before any work: the render directory is usable, or the cluster answers.

    An unreachable cluster is tried ``retries`` more times with [controller]'s back-off, one log line
    per attempt, then the command stops with an error (bounded: about base delay x 2^retries in
    all). Once the controller runs, a lost cluster is retried for as long as it runs.
    """
    render = getattr(args, "render", None)
    kubeconfig = None if render is not None else (getattr(args, "kubeconfig", None) or conf.controller.kubeconfig)
    if not kubeconfig:
        directory = render or conf.controller.render_dir
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise OperatorError(f"--render {directory}: not a directory (give a directory for the YAML files)")
        return
    client, server = open_cluster(kubeconfig, conf.controller.request_timeout)
    try:
        probe_cluster(client, server, kubeconfig, retries, conf.controller.retry_base_delay)
    finally:
        client.close()


def open_cluster(kubeconfig: str, timeout: float):
    """(lightkube client, API server URL) for a kubeconfig file; OperatorError if it is unusable."""
    import yaml
    from lightkube import ConfigError, KubeConfig

    from openkeel_compute.controller.kube import make_client

    if not os.path.isfile(kubeconfig):
        raise OperatorError(f"kubeconfig {kubeconfig} not found (check --kubeconfig or [controller] kubeconfig)")
    try:
        server = KubeConfig.from_file(kubeconfig).get().cluster.server  # type: ignore[union-attr]  # below
        return make_client(kubeconfig, timeout), server
    except (ConfigError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # lightkube's ConfigError, YAML errors, and a YAML file of another shape
        raise OperatorError(f"kubeconfig {kubeconfig} is not a usable kubeconfig: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem and mark is not None:  # a YAML error
        return f"invalid YAML: {problem} at line {mark.line + 1}, column {mark.column + 1}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def probe_cluster(client, server: str, kubeconfig: str, max_retries: int, base_delay: float = 0.2) -> None:
    """List namespaces (what every resync does first); OperatorError when the cluster does not answer."""
    import httpx2
    from lightkube import ApiError

    from openkeel_compute.controller.gateway import Gateway
    from openkeel_compute.controller.kube import Retry

    gateway = Gateway(client, Retry(max_retries, base_delay))
    try:
        gateway.namespaces()
    except ApiError as exc:
        raise OperatorError(f"Kubernetes at {server} (kubeconfig {kubeconfig}) refused to list namespaces: "
                            f"{exc.status.code} {exc.status.message}") from None
    except httpx2.HTTPError as exc:
        tries = f" after {max_retries + 1} attempts" if max_retries else ""
        raise OperatorError(f"cannot reach Kubernetes at {server} (kubeconfig {kubeconfig}){tries}: "
                            f"{type(exc).__name__}: {exc} (check the cluster address and that it is up)") from None


def _status(args) -> int:
    from openkeel_compute.api.flavor_checks import check_fields
    from openkeel_compute.conf.kubevirt import mapping_options
    from openkeel_compute.controller.service import build_backend
    from openkeel_compute.controller.status import flavor_statuses, format_table

    args.config_file = getattr(args, "config_file", [])
    conf = load_conf(args)
    _check_target(conf, args, retries=0)
    engine = open_database(conf)
    backend, _client = build_backend(conf, getattr(args, "kubeconfig", None), getattr(args, "render", None))
    try:
        statuses = flavor_statuses(engine, backend, mapping_options(conf),
                                   conf.controller.create_namespaces, args.id, check=check_fields)
    finally:
        backend.close()
    if args.id is not None and all(not s.exists and s.in_sync for s in statuses):
        print(f"error: no flavor {args.id}: not in the catalogue, and no KubeVirt objects of it", file=sys.stderr)
        return 1
    sys.stdout.write(format_table(statuses))
    return 0 if all(s.in_sync for s in statuses) else 1
