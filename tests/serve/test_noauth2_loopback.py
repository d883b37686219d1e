"""noauth2 is only ever served on loopback addresses, however it was switched on, and says so.

Every entry point: `openkeel-compute serve` (and so scripts/serve, which runs it with its embedded
defaults first), the WSGI module an external server loads, and the application itself (requests
from peers that are not loopback addresses get the 401 page).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from openkeel_compute.api.auth import noauth2_bind_error
from openkeel_compute.cmd.serve import check_noauth2_bind
from tests.conftest import ROOT, make_conf
from tests.serve.cli import error_line, run, write_conf
from tests.serve.helpers import free_port, running
from tests.wsgi_client import Client

SERVE_DEFAULTS = str(ROOT / "etc/openkeel-compute-serve.conf")


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.1.1"])
def test_loopback_addresses_are_accepted(host):
    assert noauth2_bind_error(host) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "nonexistent.invalid"])
def test_any_other_address_is_refused_in_one_line(host):
    error = noauth2_bind_error(host)
    assert error is not None and "\n" not in error
    assert f"never on '{host}'" in error and "auth_strategy = keystone" in error


def test_serve_refuses_noauth2_on_all_addresses(tmp_path):
    conf = write_conf(tmp_path, "[api]\nauth_strategy = noauth2\n")
    line = error_line(run("serve", "--config-file", conf, "--host", "0.0.0.0", "--port", str(free_port())))
    assert line.startswith("error: [api] auth_strategy = noauth2 trusts any") and "never on '0.0.0.0'" in line


def test_scripts_serve_defaults_with_a_production_bind_refuse_to_start(tmp_path):
    """What scripts/serve --config-file prod.conf runs: its noauth2 defaults first, then prod.conf's bind."""
    prod = write_conf(tmp_path, "[wsgi]\nhost = 0.0.0.0\n", name="prod.conf")
    line = error_line(run("serve", "--config-file", SERVE_DEFAULTS, "--config-file", prod, "--port",
                          str(free_port())))
    assert "never on '0.0.0.0'" in line


def test_noauth2_from_the_environment_is_held_to_the_same_rule(tmp_path):
    conf = write_conf(tmp_path, "[wsgi]\nhost = 0.0.0.0\n")  # auth_strategy keystone by default
    env = dict(os.environ, OS_API__AUTH_STRATEGY="noauth2", PYTHONWARNINGS="ignore")
    from tests.serve.cli import command

    done = subprocess.run([*command(), "serve", "--config-file", conf, "--port", str(free_port())], env=env,
                          capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    assert "never on '0.0.0.0'" in error_line(done)


def test_serve_says_at_start_that_noauth2_listens_on_loopback_only(tmp_path):
    conf = write_conf(tmp_path, "[api]\nauth_strategy = noauth2\n")
    cli = [sys.executable, "-m", "openkeel_compute.cmd.main"]
    subprocess.run([*cli, "db", "sync", "--config-file", conf], check=True, capture_output=True)
    port = free_port()
    with running([*cli, "serve", "--config-file", conf, "--port", str(port)], port) as proc:
        pass
    output = proc.stdout.read()
    assert "auth_strategy = noauth2 (development only): listening on the loopback address 127.0.0.1 only" in output


def test_the_check_is_silent_for_keystone(tmp_path, caplog):
    conf = make_conf(tmp_path, auth_strategy="keystone")
    check_noauth2_bind(conf, "0.0.0.0")
    assert caplog.records == []


def _load_wsgi(conf_path, **env):
    probe = "import openkeel_compute.wsgi as w; print(callable(w.application))"
    environ = {k: v for k, v in os.environ.items() if k != "OPENKEEL_LISTEN_HOST"}
    return subprocess.run([sys.executable, "-c", probe], env=dict(environ, OPENKEEL_CONFIG_FILES=conf_path, **env),
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_wsgi_module_refuses_noauth2_declared_on_another_address(tmp_path):
    conf = write_conf(tmp_path, "[api]\nauth_strategy = noauth2\n[wsgi]\nhost = 0.0.0.0\n")
    done = _load_wsgi(conf)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: [api] auth_strategy = noauth2")
    # serve's workers are told the address serve checked and binds
    assert _load_wsgi(conf, OPENKEEL_LISTEN_HOST="127.0.0.1").stdout.strip() == "True"


def test_requests_from_other_peers_get_the_401_page_even_through_proxy_headers(tmp_path):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from openkeel_compute.db import api as db_api
    from openkeel_compute.db import migration

    policies.reset()
    conf = make_conf(tmp_path, oslo_middleware={"enable_proxy_headers_parsing": "true"})
    migration.sync(db_api.get_engine(conf))
    client = Client(deploy(conf))
    try:
        headers = {"X-Auth-Token": "admin:admin"}
        assert client.get("/v2.1/flavors", headers=headers).status_code == 200
        for peer in ("192.0.2.7", "::ffff:192.0.2.7", "not-an-address"):
            refused = client.request("GET", "/v2.1/flavors", headers={**headers, "X-Forwarded-For": "127.0.0.1"},
                                     extra_environ={"REMOTE_ADDR": peer})
            assert refused.status_code == 401, refused.text
        assert client.request("GET", "/v2.1/flavors", headers=headers,
                              extra_environ={"REMOTE_ADDR": "::ffff:127.0.0.1"}).status_code == 200
    finally:
        db_api.dispose_all()
        policies.reset()
