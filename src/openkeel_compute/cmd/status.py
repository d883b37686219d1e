"""``openkeel-compute status``: can this configuration work? (what ``nova-status upgrade check`` is for Nova)

    openkeel-compute status [--config-file FILE ...] [--json]

Checks the database (reachable, schema at head), the policy file, the API's authentication and,
when a kubeconfig is configured, the Kubernetes API. Prints oslo.upgradecheck's results table and
exits as nova-status does: 0 success, 1 warning, 2 failure, 255 when the checks could not run.

``serve`` runs the same database, policy and authentication checks before it listens
(``preflight()``) and refuses to start on a failure.
"""

from __future__ import annotations

import enum
import logging
import os
import types
from typing import NamedTuple

from openkeel_compute.cmd.common import OperatorError, add_config_args, database_message, load_conf

LOG = logging.getLogger(__name__)

DB_SYNC = "run `openkeel-compute db sync`"


class Code(enum.IntEnum):
    """oslo.upgradecheck's codes (imported only by the command: serve's master does not need it)."""

    SUCCESS = 0
    WARNING = 1
    FAILURE = 2


class Result(NamedTuple):
    code: Code
    details: str | None = None


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "status", help="check the configuration, database, policy, auth and cluster (like nova-status)",
        description="Can this configuration work? What nova-status upgrade check is for Nova: the database reachable and at head, the policy file valid, authentication configured, Kubernetes reachable when configured.")
    add_config_args(parser)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=_status)


def _status(args) -> int:
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
    try:
        conf = load_conf(args)
    except OperatorError as exc:
        exc.status = 255
        raise
    except Exception as exc:
        from openkeel_compute.cmd.common import operator_message

        message = operator_message(exc)
        if message is None:
            raise
        raise OperatorError(message, status=255) from exc
    from oslo_upgradecheck import upgradecheck

    # oslo.upgradecheck reads --json from its module's CONF (``command.json``).
    upgradecheck.CONF = types.SimpleNamespace(command=types.SimpleNamespace(json=args.json))  # type: ignore[assignment]
    try:
        return int(status_commands(conf).check())
    finally:
        upgradecheck.CONF = None
        _dispose()


def _dispose() -> None:
    from openkeel_compute.db import api as db_api

    db_api.dispose_all()


# -- the checks (each takes the configuration, returns a Result) ------------------------------------


def check_database(conf) -> Result:
    """The database answers and its schema is at this release's head revision."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from openkeel_compute.db import api as db_api
    from openkeel_compute.db import revision

    url = conf.database.connection
    if url:
        try:
            shown = make_url(url).render_as_string(hide_password=True)
        except ArgumentError as exc:
            return Result(Code.FAILURE, database_message(exc))
    else:
        shown = "sqlite:///" + os.path.join(conf.state_path, "openkeel.sqlite")
    if shown.startswith("sqlite:///") and shown != "sqlite:///:memory:":
        path = shown[len("sqlite:///"):]
        if not os.path.exists(path):
            return Result(Code.FAILURE, f"the database {shown} does not exist: {DB_SYNC}")
    try:
        engine = db_api.get_engine(conf)
        current = revision.current(engine)
    except Exception as exc:
        if not type(exc).__module__.startswith("sqlalchemy"):
            raise
        return Result(Code.FAILURE, database_message(exc, shown))
    head = revision.head()
    if current is None:
        return Result(Code.FAILURE, f"the database {shown} has no schema: {DB_SYNC}")
    if current != head:
        return Result(Code.FAILURE, f"the schema of {shown} is at revision {current}, this release needs "
                                    f"{head}: {DB_SYNC}")
    return Result(Code.SUCCESS, f"{shown} at revision {head}")


def check_policy(conf) -> Result:
    """[oslo_policy] is usable: scope enforcement on, and the policy file (if any) loads."""
    from oslo_policy import policy

    from openkeel_compute import policies

    if not conf.oslo_policy.enforce_scope:
        return Result(Code.FAILURE, "[oslo_policy] enforce_scope = false is not supported (scope is always "
                                    "enforced): remove the option or set it to true")
    name = conf.oslo_policy.policy_file
    path = conf.find_file(name)
    if path is None:
        return Result(Code.SUCCESS, f"no policy file {name}: the defaults apply")
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(policies.list_rules())
    try:
        enforcer.load_rules(force_reload=True)
    except Exception as exc:  # noqa: BLE001 - whatever stops oslo.policy loading it makes the file unusable
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Result(Code.FAILURE, f"the policy file {path} cannot be loaded: {reason}")
    unknown = sorted(set(enforcer.file_rules) - set(enforcer.registered_rules))
    if unknown:
        return Result(Code.WARNING, f"the policy file {path} sets rules this service does not have: "
                                    f"{', '.join(unknown)}")
    return Result(Code.SUCCESS, f"{path} loads ({len(enforcer.file_rules)} rule(s) overridden)")


def check_auth(conf) -> Result:
    """The API can authenticate requests: noauth2 (development) or a complete [keystone_authtoken]."""
    strategy = conf.api.auth_strategy
    if strategy == "noauth2":
        return Result(Code.WARNING, "[api] auth_strategy = noauth2 trusts any 'X-Auth-Token: user:project' "
                                    "(development only); use keystone in production")
    from keystoneauth1 import exceptions as ks_exceptions
    from keystoneauth1 import loading
    from keystonemiddleware import auth_token

    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    section = conf.keystone_authtoken
    if not section.auth_type:
        return Result(Code.FAILURE, "[api] auth_strategy = keystone needs [keystone_authtoken] auth_type, auth_url "
                                    "and the service user's credentials (or [api] auth_strategy = noauth2 "
                                    "for development)")
    try:
        loading.load_auth_from_conf_options(conf, "keystone_authtoken")
    except ks_exceptions.MissingRequiredOptions as exc:
        names = ", ".join(o.dest for o in exc.options)
        return Result(Code.FAILURE, f"[keystone_authtoken] auth_type = {section.auth_type} also needs: {names}")
    except ks_exceptions.NoMatchingPlugin as exc:
        return Result(Code.FAILURE, f"[keystone_authtoken] auth_type: {exc}")
    if not section.www_authenticate_uri:
        return Result(Code.WARNING, "[keystone_authtoken] www_authenticate_uri is unset: 401 answers will not "
                                    "tell clients where to authenticate")
    return Result(Code.SUCCESS, f"keystone ({section.auth_type}), tokens from {section.www_authenticate_uri}")


def check_kubernetes(conf) -> Result:
    """When [controller] kubeconfig is set: the kubeconfig loads and the cluster answers."""
    kubeconfig = getattr(getattr(conf, "controller", None), "kubeconfig", None)
    if not kubeconfig:
        if getattr(conf.controller, "driver", "emulated") == "kubernetes":
            return Result(Code.FAILURE, "[controller] driver = kubernetes needs a kubeconfig "
                                        "([controller] kubeconfig or --kubeconfig)")
        return Result(Code.SUCCESS, "no [controller] kubeconfig: the controller runs the built-in KubeVirt "
                                    "emulator ([controller] driver = emulated)")
    from openkeel_compute.cmd.controller import open_cluster, probe_cluster

    try:
        client, server = open_cluster(kubeconfig, conf.controller.request_timeout)
        try:
            probe_cluster(client, server, kubeconfig, max_retries=0)
        finally:
            client.close()
    except OperatorError as exc:
        return Result(Code.FAILURE, str(exc))
    return Result(Code.SUCCESS, f"{server} answers (kubeconfig {kubeconfig})")


def status_commands(conf):
    """oslo.upgradecheck's UpgradeCommands running the checks above on ``conf``."""
    from oslo_upgradecheck import common_checks, upgradecheck

    def _wrap(check):
        def run(_self):
            result = check(conf)
            return upgradecheck.Result(upgradecheck.Code(int(result.code)), result.details)
        return run, {}

    class _StatusCommands(upgradecheck.UpgradeCommands):
        display_title = "Status Check Results"
        _upgrade_checks = (
            ("Database", _wrap(check_database)),
            ("Policy File", _wrap(check_policy)),
            ("Policy File JSON to YAML Migration", (common_checks.check_policy_json, {"conf": conf})),
            ("API Authentication", _wrap(check_auth)),
            ("Kubernetes", _wrap(check_kubernetes)),
        )

    return _StatusCommands()


def preflight(conf) -> None:
    """What ``serve`` checks before it listens: a failure is an OperatorError (one line, no start)."""
    try:
        for check in (check_policy, check_auth, check_database):
            result = check(conf)
            if result.code == Code.FAILURE:
                raise OperatorError(f"{result.details}; not starting")
    finally:
        _dispose()  # no connection of the master's may reach the workers
