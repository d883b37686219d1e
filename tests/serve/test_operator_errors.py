"""What the operator has to fix ends a command with one ``error:`` line and a non-zero status, no traceback."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.serve.cli import command, error_line, run, write_conf
from tests.serve.helpers import unreachable_kubeconfig

NOAUTH = "[api]\nauth_strategy = noauth2\n"
UNREACHABLE_DB = "[database]\nconnection = postgresql+psycopg://nobody@127.0.0.1:1/nothing\n"


def test_a_missing_config_file(tmp_path) -> None:
    line = error_line(run("db", "version", "--config-file", str(tmp_path / "nope.conf")))
    assert line == f"error: configuration file not found: {tmp_path / 'nope.conf'} (check --config-file)"


def test_an_unparsable_config_file(tmp_path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text("garbage\n")
    line = error_line(run("db", "version", "--config-file", str(path)))
    assert line.startswith(f"error: cannot parse configuration file {path}: ") and "'garbage'" in line


@pytest.mark.parametrize("command_line", [["serve"], ["db", "sync"], ["status"]])
def test_an_invalid_value_names_the_option_and_the_file(tmp_path, command_line) -> None:
    conf = write_conf(tmp_path, "[api]\nauth_strategy = bogus\n")
    done = run(*command_line, "--config-file", conf)
    line = error_line(done, 255 if command_line == ["status"] else 1)
    assert line == (f"error: [api] auth_strategy in {conf}: Valid values are [keystone, noauth2], "
                    "but found 'bogus'")


def test_an_invalid_port_in_the_config_file(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH + "[wsgi]\nport = 99999\n")
    assert error_line(run("serve", "--config-file", conf)).startswith(f"error: [wsgi] port in {conf}: ")


def test_an_invalid_port_on_the_command_line(tmp_path) -> None:
    line = error_line(run("serve", "--port", "99999"), status=2)
    assert line == "error: argument --port: 99999 is not a TCP port number (1-65535) (see openkeel-compute serve --help)"


def test_no_workers_on_the_command_line() -> None:
    line = error_line(run("serve", "--workers", "0"), status=2)
    assert line == "error: argument --workers: 0 is not a whole number of at least 1 (see openkeel-compute serve --help)"


def test_an_unknown_host(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH)
    assert run("db", "sync", "--config-file", conf).returncode == 0
    line = error_line(run("serve", "--config-file", conf, "--host", "no-such-host.invalid"))
    assert line.startswith("error: cannot listen on no-such-host.invalid: ") and line.endswith(
        "(check --host or [wsgi] host)")


def test_enforce_scope_false_is_refused_before_listening(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH + "[oslo_policy]\nenforce_scope = false\n")
    done = run("serve", "--config-file", conf, "--port", "1")
    line = error_line(done)
    assert line == ("error: [oslo_policy] enforce_scope = false is not supported (scope is always enforced): "
                    "remove the option or set it to true; not starting")
    assert "Listening" not in done.stderr and "OpenKeel compute API on" not in done.stderr


@pytest.mark.parametrize("command_line", [["db", "sync"], ["db", "version"], ["serve"], ["flavor", "status"]])
def test_an_unreachable_database(tmp_path, command_line) -> None:
    conf = write_conf(tmp_path, NOAUTH + UNREACHABLE_DB)
    line = error_line(run(*command_line, "--config-file", conf))
    assert "error: cannot use the database" in line and "127.0.0.1" in line and "port 1" in line
    assert "check [database] connection and that the server is up" in line


def test_an_unparsable_database_url(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH + "[database]\nconnection = not a url\n")
    line = error_line(run("db", "sync", "--config-file", conf))
    assert line.startswith("error: [database] connection is not a usable database URL: ")


def test_an_unknown_schema_revision(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH)
    line = error_line(run("db", "sync", "--config-file", conf, "--revision", "nope"))
    assert line == ("error: database schema: Can't locate revision identified by 'nope' "
                    "(`openkeel-compute db version` shows the database's revision)")


def test_controller_kubeconfig_missing(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH)
    line = error_line(run("controller", "--config-file", conf, "--kubeconfig", str(tmp_path / "kc"), "--once"))
    assert line == f"error: kubeconfig {tmp_path / 'kc'} not found (check --kubeconfig or [controller] kubeconfig)"


def test_controller_on_a_cluster_without_placement_is_refused(tmp_path) -> None:
    from openkeel_compute.emulator import Emulator

    cluster = Emulator().start()
    try:
        kubeconfig = tmp_path / "kc.yaml"
        kubeconfig.write_text(yaml.safe_dump(cluster.kubeconfig()))
        conf = write_conf(tmp_path, NOAUTH)
        run("db", "sync", "--config-file", conf)
        done = run("controller", "--config-file", conf, "--kubeconfig", str(kubeconfig), "--once")
    finally:
        cluster.stop()
    assert error_line(done, status=2) == (
        "error: [placement] is not configured: the controller claims every server's resources in Placement; "
        "set [placement] auth_type and its credentials (auth_url, username, password, project_name, "
        "user_domain_name, project_domain_name), or [placement_service] embedded = true for development")


@pytest.mark.parametrize(("text", "reason"), [
    ("not: [yaml\n", "invalid YAML: expected ',' or ']', but got '<stream end>' at line 2, column 1"),
    ("apiVersion: v1\nkind: Config\n", "KeyError: 'clusters'"),
])
def test_controller_kubeconfig_malformed(tmp_path, text, reason) -> None:
    conf = write_conf(tmp_path, NOAUTH)
    kubeconfig = tmp_path / "kc.yaml"
    kubeconfig.write_text(text)
    line = error_line(run("controller", "--config-file", conf, "--kubeconfig", str(kubeconfig), "--once"))
    assert line == f"error: kubeconfig {kubeconfig} is not a usable kubeconfig: {reason}"


@pytest.mark.parametrize("once", [True, False])
def test_controller_unreachable_cluster_shows_each_retry_then_stops(tmp_path, once) -> None:
    conf = write_conf(tmp_path, NOAUTH + "[controller]\nmax_retries = 3\nretry_base_delay = 0.01\n")
    kubeconfig = unreachable_kubeconfig(tmp_path)
    done = run("controller", "--config-file", conf, "--kubeconfig", kubeconfig, *(["--once"] if once else []))
    line = error_line(done)
    assert line == (f"error: cannot reach Kubernetes at https://127.0.0.1:1 (kubeconfig {kubeconfig}) after 4 "
                    "attempts: ConnectError: [Errno 111] Connection refused (check the cluster address and "
                    "that it is up)")
    retries = [x for x in done.stderr.splitlines() if "list Namespace: ConnectError, retry" in x]
    assert [x.split("retry ")[1].split(" ")[0] for x in retries] == ["1/3", "2/3", "3/3"], done.stderr


def test_controller_render_into_a_file(tmp_path) -> None:
    conf = write_conf(tmp_path, NOAUTH)
    target = tmp_path / "a-file"
    target.write_text("")
    for args in (["controller", "--once"], ["controller", "status"]):
        line = error_line(run(*args, "--config-file", conf, "--render", str(target)))
        assert line == f"error: --render {target}: not a directory (give a directory for the YAML files)"


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    # `openkeel-compute extra-specs list | head`: the reader is gone before the output is written.
    proc = subprocess.Popen([*command(), "extra-specs", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    status = proc.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert (status, stderr) == (141, ""), stderr  # 128 + SIGPIPE, as a shell reports such a command


def test_the_local_image_service_on_a_busy_port(tmp_path) -> None:
    import socket
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "openkeel_compute.images.local", "serve", "--dir",
                               str(tmp_path), "--port", str(port)], capture_output=True, text=True, timeout=60,
                              check=False)
    assert error_line(done) == (f"error: cannot listen on 127.0.0.1 port {port}: already in use (choose another "
                                "with --port; 0 takes any free one)")
