"""Start-up checks: a busy port, `serve`'s refusals, /healthcheck's database, `openkeel-compute status`."""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3

import pytest
import yaml
from oslo_upgradecheck.upgradecheck import Code

from openkeel_compute.cmd import status
from openkeel_compute.cmd.common import OperatorError
from openkeel_compute.cmd.serve import check_port_free
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import make_conf
from tests.serve.cli import command, error_line, run, write_conf
from tests.serve.helpers import free_port, running, unreachable_kubeconfig

NOAUTH = "[api]\nauth_strategy = noauth2\n"
KEYSTONE = {
    "www_authenticate_uri": "http://127.0.0.1:9/identity", "auth_url": "http://127.0.0.1:9/identity",
    "auth_type": "password", "username": "nova", "password": "secret", "project_name": "service",
    "user_domain_name": "Default", "project_domain_name": "Default",
}


def _ini(sections: dict) -> str:
    return "".join(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) for name, values in sections.items())


@pytest.fixture(autouse=True)
def _dispose():
    yield
    db_api.dispose_all()


# -- item: a busy port ---------------------------------------------------------------------------------


def test_a_second_server_on_a_busy_port_refuses_to_start(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH)
    assert run("db", "sync", "--config-file", conf).returncode == 0
    port = free_port()
    with running([*command(), "serve", "--config-file", conf, "--port", str(port)], port):
        second = run("serve", "--config-file", conf, "--port", str(port), timeout=60)
    line = error_line(second)
    assert line == (f"error: port {port} on 127.0.0.1 is already in use (stop the other server, or choose "
                    "another port with --port or [wsgi] port)")
    assert "Listening" not in second.stderr and "OpenKeel compute API on" not in second.stderr


def test_a_port_held_with_so_reuseport_is_busy() -> None:
    # granian's own socket option: without the check a second granian would share the port
    with contextlib.closing(socket.socket()) as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        with pytest.raises(OperatorError, match=f"port {port} on 127.0.0.1 is already in use"):
            check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", port)  # free again once the holder is gone


# -- serve refuses what cannot work --------------------------------------------------------------------


def test_bare_serve_needs_keystone_settings(tmp_path) -> None:
    line = error_line(run("serve", "--config-file", write_conf(tmp_path, "")))
    assert line == ("error: [api] auth_strategy = keystone needs [keystone_authtoken] auth_type, auth_url and the "
                    "service user's credentials (or [api] auth_strategy = noauth2 for development); not starting")


def test_serve_refuses_a_database_without_the_schema(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH)
    line = error_line(run("serve", "--config-file", conf))
    assert line == (f"error: the database sqlite:///{tmp_path}/state/openkeel.sqlite does not exist: run "
                    "`openkeel-compute db sync`; not starting")


def test_serve_refuses_an_invalid_policy_file(tmp_path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("{not yaml\n")
    conf = write_conf(tmp_path, NOAUTH + f"[oslo_policy]\npolicy_file = {policy}\n")
    assert run("db", "sync", "--config-file", conf).returncode == 0
    line = error_line(run("serve", "--config-file", conf))
    assert line.startswith(f"error: the policy file {policy} cannot be loaded: ") and line.endswith("; not starting")


# -- the checks, one by one ------------------------------------------------------------------------------


def test_database_check(tmp_path) -> None:
    conf = make_conf(tmp_path)
    shown = f"sqlite:///{tmp_path}/openkeel.sqlite"
    result = status.check_database(conf)
    assert (result.code, result.details) == (Code.FAILURE, (f"the database {shown} does not exist: run "
                                                           "`openkeel-compute db sync`"))
    assert not (tmp_path / "openkeel.sqlite").exists(), "the check must not create the database"
    sqlite3.connect(tmp_path / "openkeel.sqlite").close()
    result = status.check_database(conf)
    assert (result.code, result.details) == (Code.FAILURE, (f"the database {shown} has no schema: run "
                                                           "`openkeel-compute db sync`"))
    migration.sync(db_api.get_engine(conf))
    head = migration.head()
    assert (status.check_database(conf).code, status.check_database(conf).details) == (
        Code.SUCCESS, f"{shown} at revision {head}")
    with db_api.get_engine(conf).begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = 'older'")
    result = status.check_database(conf)
    assert (result.code, result.details) == (
        Code.FAILURE, (f"the schema of {shown} is at revision older, this release needs {head}: run "
                      "`openkeel-compute db sync`"))


def test_database_check_unreachable_and_unparsable(tmp_path) -> None:
    down = status.check_database(make_conf(tmp_path, database={
        "connection": "postgresql+psycopg://nobody:secret@127.0.0.1:1/x"}))
    assert down.code == Code.FAILURE
    assert down.details.startswith("cannot use the database postgresql+psycopg://nobody:***@127.0.0.1:1/x: ")
    assert "secret" not in down.details
    bad = status.check_database(make_conf(tmp_path, database={"connection": "not a url"}))
    assert bad.code == Code.FAILURE and bad.details.startswith("[database] connection is not a usable database URL")


def test_policy_check(tmp_path) -> None:
    result = status.check_policy(make_conf(tmp_path))
    assert (result.code, result.details) == (Code.SUCCESS, "no policy file policy.yaml: the defaults apply")
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"os_compute_api:os-flavor-manage:create": "role:admin"}))
    conf = make_conf(tmp_path, oslo_policy={"policy_file": str(policy)})
    result = status.check_policy(conf)
    assert (result.code, result.details) == (Code.SUCCESS, f"{policy} loads (1 rule(s) overridden)")
    policy.write_text(yaml.safe_dump({"os_compute_api:os-flavor-manage:creat": "role:admin"}))
    result = status.check_policy(conf)
    assert (result.code, result.details) == (
        Code.WARNING, (f"the policy file {policy} sets rules this service does not have: "
                      "os_compute_api:os-flavor-manage:creat"))
    policy.write_text("{not yaml\n")
    assert status.check_policy(conf).code == Code.FAILURE
    result = status.check_policy(make_conf(tmp_path, oslo_policy={"enforce_scope": "false"}))
    assert result.code == Code.FAILURE and "enforce_scope = false is not supported" in result.details


def test_auth_check(tmp_path) -> None:
    assert status.check_auth(make_conf(tmp_path)).code == Code.WARNING  # noauth2
    missing = status.check_auth(make_conf(tmp_path, auth_strategy="keystone"))
    assert missing.code == Code.FAILURE and "needs [keystone_authtoken] auth_type" in missing.details
    partial = dict(KEYSTONE)
    del partial["auth_url"]
    result = status.check_auth(make_conf(tmp_path, auth_strategy="keystone", keystone_authtoken=partial))
    assert (result.code, result.details) == (
        Code.FAILURE, "[keystone_authtoken] auth_type = password also needs: auth_url")
    result = status.check_auth(make_conf(tmp_path, auth_strategy="keystone", keystone_authtoken=KEYSTONE))
    assert (result.code, result.details) == (
        Code.SUCCESS, "keystone (password), tokens from http://127.0.0.1:9/identity")


def test_kubernetes_check(tmp_path) -> None:
    from tests.controller.apiserver import RunningApiServer

    result = status.check_kubernetes(make_conf(tmp_path))
    assert (result.code, result.details) == (
        Code.SUCCESS, ("no [controller] kubeconfig: the controller runs the built-in KubeVirt emulator "
                       "([controller] driver = emulated)"))
    result = status.check_kubernetes(make_conf(tmp_path, controller={"driver": "kubernetes"}))
    assert result.code == Code.FAILURE and "needs a kubeconfig" in result.details
    down = unreachable_kubeconfig(tmp_path)
    result = status.check_kubernetes(make_conf(tmp_path, controller={"kubeconfig": down}))
    assert result.code == Code.FAILURE
    assert result.details.startswith(f"cannot reach Kubernetes at https://127.0.0.1:1 (kubeconfig {down}): ")
    missing = status.check_kubernetes(make_conf(tmp_path, controller={"kubeconfig": str(tmp_path / "none")}))
    assert missing.code == Code.FAILURE and "not found" in missing.details
    server = RunningApiServer().start()
    try:
        kubeconfig = tmp_path / "up.yaml"
        kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
        result = status.check_kubernetes(make_conf(tmp_path, controller={"kubeconfig": str(kubeconfig)}))
        assert (result.code, result.details) == (Code.SUCCESS, f"{server.url} answers (kubeconfig {kubeconfig})")
    finally:
        server.stop()


# -- the command: table, JSON, exit codes like nova-status -------------------------------------------------


def test_status_exit_codes(tmp_path) -> None:
    keystone = write_conf(tmp_path, _ini({"api": {"auth_strategy": "keystone"}, "keystone_authtoken": KEYSTONE}),
                          name="keystone.conf")
    noauth = write_conf(tmp_path, NOAUTH, name="noauth.conf")
    failed = run("status", "--config-file", noauth)
    assert failed.returncode == 2, failed.stderr
    assert "| Check: Database" in failed.stdout and "| Result: Failure" in failed.stdout
    assert run("db", "sync", "--config-file", noauth).returncode == 0
    warned = run("status", "--config-file", noauth)
    assert warned.returncode == 1 and "| Result: Warning" in warned.stdout, warned.stdout
    done = run("status", "--config-file", keystone, "--json")
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["name"] == "Status Check Results"
    assert [(c["check"], c["result"]) for c in report["checks"]] == [
        ("Database", 0), ("Policy File", 0), ("Policy File JSON to YAML Migration", 0), ("API Authentication", 0),
        ("Kubernetes", 0)]
    line = error_line(run("status", "--config-file", str(tmp_path / "none.conf")), status=255)
    assert line.startswith("error: configuration file not found")


# -- /healthcheck reports the database ------------------------------------------------------------------


def _healthcheck(conf):
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    return Client(deploy(conf)).request("GET", "/healthcheck")


def test_healthcheck_answers_200_when_the_database_answers(tmp_path) -> None:
    conf = make_conf(tmp_path)
    migration.sync(db_api.get_engine(conf))
    result = _healthcheck(conf)
    assert (result.status, result.text) == ("200 OK", "OK")


def test_healthcheck_answers_503_when_the_database_does_not(tmp_path) -> None:
    conf = make_conf(tmp_path, database={"connection": "postgresql+psycopg://nobody@127.0.0.1:1/x"})
    result = _healthcheck(conf)
    assert (result.status, result.text) == ("503 Service Unavailable", "DB NOT OK")


def test_healthcheck_keeps_the_configured_backends(tmp_path) -> None:
    flag = tmp_path / "disabled"
    flag.write_text("")
    conf = make_conf(tmp_path, healthcheck={"backends": "disable_by_file", "disable_by_file_path": str(flag)})
    migration.sync(db_api.get_engine(conf))
    result = _healthcheck(conf)
    assert (result.status, result.text) == ("503 Service Unavailable", "DISABLED BY FILE\nOK")
    assert conf.healthcheck.backends == ["disable_by_file", "openkeel_database"]
