"""scripts/serve's ports: each has an option, each one taken is said in one line at start, a busy one
stops a start in one line before anything runs, and a start that fails leaves the running one's
var/clouds.yaml alone."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request

import pytest
import yaml

from openkeel_compute.consoles import novnc
from tests.processes import tree
from tests.scripts.checkout import free_port, make_checkout
from tests.scripts.stack import Stack

OPTIONS = ("--port", "--image-port", "--placement-port", "--emulator-port", "--console-port", "--metadata-port",
           "--metrics-port")


def _answers(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status


@pytest.fixture(scope="module")
def every_port_given(tmp_path_factory):
    """A stack with every port chosen on the command line."""
    ports = {option: free_port() for option in OPTIONS[1:]}
    stack = Stack(tmp_path_factory.mktemp("ports"), *(x for o, p in ports.items() for x in (o, str(p))))
    ports["--port"] = stack.port
    stack.start()
    try:
        yield stack, ports
    finally:
        stack.stop()


def _serve(checkout, *args: str) -> subprocess.CompletedProcess:
    from tests.scripts.checkout import clean_env

    return subprocess.run([str(checkout / "scripts/serve"), *args], cwd=checkout, env=clean_env(checkout.parent),
                          capture_output=True, text=True, timeout=120, check=False)


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and done.stderr.rstrip("\n").endswith(errors[0]), done.stderr
    return errors[0]


def test_every_port_is_the_one_given_and_said_once(every_port_given):
    stack, ports = every_port_given
    said = [line for line in stack.log().splitlines() if line.startswith("serve: port ")]
    assert len(said) == len(OPTIONS), said
    for option, port in ports.items():
        [line] = [s for s in said if s.endswith(f"(move it with {option})")]
        assert line.startswith(f"serve: port {port} taken by "), line
    assert _answers(f"http://127.0.0.1:{ports['--image-port']}/v2/images") == 200
    assert _answers(f"http://127.0.0.1:{ports['--placement-port']}/") == 200
    kubeconfig = yaml.safe_load((stack.checkout / "var/emulator.kubeconfig").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == f"http://127.0.0.1:{ports['--emulator-port']}"
    assert _answers(f"http://127.0.0.1:{ports['--emulator-port']}/api/v1/nodes") == 200
    try:  # the console proxy serves noVNC's page, or says noVNC is absent
        got = _answers(f"http://127.0.0.1:{ports['--console-port']}/vnc_lite.html")
    except urllib.error.HTTPError as exc:
        got = exc.code
    assert got == (200 if novnc.find(None) else 404)
    assert "vnc_auto.html" in (stack.checkout / "var/serve-consoles.conf").read_text()
    with urllib.request.urlopen(f"http://127.0.0.1:{ports['--metadata-port']}/", timeout=10) as resp:
        assert resp.read().decode().split("\n")[-1] == "latest"  # the metadata service's EC2 versions
    with urllib.request.urlopen(f"http://127.0.0.1:{ports['--metrics-port']}/metrics", timeout=10) as resp:
        assert b"# TYPE" in resp.read()
    # the clients find the image service where it is, through the noauth2 token's catalog
    token = json.dumps({"auth": {"identity": {"methods": ["token"], "token": {"id": "admin:admin"}}}}).encode()
    req = urllib.request.Request(f"{stack.url}/identity/v3/auth/tokens", data=token, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        catalog = {e["type"]: e["endpoints"][0]["url"] for e in json.loads(resp.read())["token"]["catalog"]}
    assert catalog["image"] == f"http://127.0.0.1:{ports['--image-port']}"


@pytest.mark.parametrize("option", OPTIONS)
def test_a_busy_port_stops_the_start_in_one_line(every_port_given, tmp_path, option):
    _, ports = every_port_given
    checkout = make_checkout(tmp_path / "other")
    (checkout / "var").mkdir()
    (checkout / "var/clouds.yaml").write_text("# a previous start's\n")
    args = {"--port": str(free_port()), "--image-port": "0", "--console-port": "0", option: str(ports[option])}
    done = _serve(checkout, *(x for item in args.items() for x in item))
    line = _one_error_line(done)
    assert line.startswith(f"error: port {ports[option]} on 127.0.0.1 is already in use: "), line
    assert f"choose another port with {option}" in line, line
    assert (checkout / "var/clouds.yaml").read_text() == "# a previous start's\n"
    assert not (checkout / "var/openkeel.sqlite").exists()  # refused before anything ran


def test_a_second_start_on_the_same_state_path_changes_nothing(every_port_given):
    stack, _ = every_port_given
    clouds = (stack.checkout / "var/clouds.yaml").read_bytes()
    running = set(tree(stack.proc.pid))
    # Every port of its own: only the state path is shared.
    done = _serve(stack.checkout, "--port", str(free_port()), "--image-port", "0", "--console-port", "0")
    line = _one_error_line(done)
    assert line.startswith("error: another scripts/serve is running on the state path var (process "
                           f"{stack.proc.pid})"), line
    assert (stack.checkout / "var/clouds.yaml").read_bytes() == clouds
    assert set(tree(stack.proc.pid)) == running
    assert stack.call("GET", "/v2.1/flavors")[0] == 200


def test_two_services_on_one_port_are_refused(tmp_path):
    checkout = make_checkout(tmp_path / "co")
    port = str(free_port())
    line = _one_error_line(_serve(checkout, "--port", port, "--placement-port", port))
    assert line == f"error: --placement-port {port} is also the port of the compute API (--port): give each its own"
