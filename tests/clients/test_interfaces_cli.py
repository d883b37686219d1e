"""The openstack CLI's interface commands against a real ``scripts/serve`` whose ``[neutron]`` is the
in-memory Neutron (tests/network/fake_neutron.py, over HTTP): ``server add port`` / ``remove port``,
``server add network`` / ``remove network``, ``server add fixed ip`` / ``remove fixed ip`` (removeFixedIp, up to 2.43), each as a
user types it (ids: the noauth2 catalog lists no network service, so the CLI passes them on as given).
Each ends as Nova's would: the port bound to the server's node with Nova's fields and in the VM's
interfaces (the server's addresses), then the user's port unbound and kept, the port OpenKeel made
deleted; ``remove fixed ip`` takes the address off the port, as Nova's. Neutron's events (network-changed,
network-vif-deleted) reach the API as its nova notifier sends them. No agent plugs ports here: ``vif_plugging_timeout = 0``."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from openkeel_compute.images import local
from tests.network.fake_neutron import FakeNeutron

CLI_TIMEOUT = 120
PROJECT = "admin"  # the project of the clouds.yaml's token (admin:admin)


@pytest.fixture(scope="module")
def neutron():
    fake = FakeNeutron()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, neutron):
    from tests.scripts.stack import Stack

    home = tmp_path_factory.mktemp("serve-neutron")
    conf = home / "neutron.conf"
    conf.write_text("[DEFAULT]\nvif_plugging_timeout = 0\n[neutron]\nauth_type = admin_token\n"
                    f"endpoint = {neutron.url}\ntoken = neutron-admin\nendpoint_override = {neutron.url}\n")
    stack = Stack(home, "--config-file", str(conf)).start()
    # Neutron's nova notifier (notify_nova_on_port_data_changes): its events reach the served API, from a
    # thread of their own as Neutron sends them after its answer
    neutron.notify = lambda events: threading.Thread(target=stack.call, daemon=True, args=(
        "POST", "/v2.1/os-server-external-events", {"events": events})).start()
    try:
        yield stack
    finally:
        stack.stop()


class Cli:
    def __init__(self, stack):
        self.env = dict(stack.env, OS_CLOUD="openkeel")
        self.exe = str(stack.checkout / "scripts/openstack")
        self.cwd = stack.checkout

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.exe, *args], check=False, env=self.env, cwd=self.cwd, capture_output=True,
                              text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)

    def ok(self, *args: str):
        got = self.run(*args)
        assert got.returncode == 0, f"openstack {' '.join(args)} -> {got.returncode}\n{got.stdout}\n{got.stderr}"
        return json.loads(got.stdout) if "json" in args else got.stdout


def _until(check, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"not reached in {timeout} s: {what}")


def test_the_cli_adds_and_removes_ports_networks_and_fixed_ips(stack, neutron):
    cli = Cli(stack)
    cli.ok("flavor", "create", "--ram", "512", "--vcpus", "1", "--disk", "1", "--id", "cli-n", "m1.clinet")
    first = neutron.network(name="private", project_id=PROJECT)
    backend = neutron.network(name="backend", project_id=PROJECT, subnet="10.1.0.0/24")
    status, body = stack.call("POST", "/v2.1/servers", {"server": {
        "name": "cli-net", "imageRef": local.DEFAULT_IMAGE_ID, "flavorRef": "cli-n",
        "networks": [{"uuid": first["id"]}]}})
    assert status == 202, body
    uuid = body["server"]["id"]
    server = stack.wait_status(uuid, "ACTIVE", timeout=90)
    node = server["OS-EXT-SRV-ATTR:host"]

    def ports():
        return {p["id"]: p for p in neutron.ports.values() if p["device_id"] == uuid}

    def bound(port_id):
        port = neutron.ports.get(port_id)
        return port is not None and port.get("binding:host_id") == node and \
            port["mac_address"] in json.dumps(stack.call("GET", f"/v2.1/servers/{uuid}")[1]["server"]["addresses"])

    def nova_fields(port_id):
        port = neutron.ports[port_id]
        return port["device_id"], port["device_owner"], port["binding:host_id"]

    # server add port / remove port: the user's port bound, then unbound and kept
    mine = neutron.port(backend, project_id=PROJECT, fixed_ips=[{"subnet_id": backend["subnets"][0],
                                                                  "ip_address": "10.1.0.50"}])
    cli.ok("server", "add", "port", "--tag", "mine", "--os-compute-api-version", "2.49", "cli-net", mine["id"])
    _until(lambda: bound(mine["id"]), "the user's port bound")
    assert nova_fields(mine["id"]) == (uuid, "compute:nova", node)
    tags = {i["port_id"]: i["tag"] for i in stack.call("GET", f"/v2.1/servers/{uuid}/os-interface")[1][
        "interfaceAttachments"]}
    assert tags[mine["id"]] == "mine"
    cli.ok("server", "remove", "port", "cli-net", mine["id"])
    _until(lambda: mine["id"] not in ports(), "the user's port given back")
    assert (mine["id"] in neutron.ports, nova_fields(mine["id"])) == (True, ("", "", None))

    # server add network / remove network: a port made on it, then deleted
    cli.ok("server", "add", "network", "cli-net", backend["id"])
    made = _until(lambda: [p for p in ports() if neutron.ports[p]["network_id"] == backend["id"]], "a port made")
    _until(lambda: bound(made[0]), "OpenKeel's port bound")
    assert nova_fields(made[0]) == (uuid, "compute:nova", node)
    cli.ok("server", "remove", "network", "cli-net", backend["id"])
    _until(lambda: made[0] not in neutron.ports, "OpenKeel's port deleted")
    assert set(ports()) == {p for p in ports() if neutron.ports[p]["network_id"] == first["id"]}

    # server add fixed ip (an interface with that address) / remove fixed ip (removeFixedIp)
    shown = cli.ok("server", "add", "fixed", "ip", "--fixed-ip-address", "10.1.0.77", "-f", "json", "cli-net",
                   backend["id"])
    assert (shown["Server ID"], shown["Network ID"]) == (uuid, backend["id"])
    assert [ip["ip_address"] for ip in shown["Fixed IPs"]] == ["10.1.0.77"]
    _until(lambda: bound(shown["Port ID"]), "the fixed IP's port bound")
    assert "10.1.0.77" in json.dumps(stack.call("GET", f"/v2.1/servers/{uuid}")[1]["server"]["addresses"])
    # removeFixedIp exists up to 2.43: at the clouds.yaml's newer version it is Nova's 404, as a user finds
    refused = cli.run("server", "remove", "fixed", "ip", "cli-net", "10.1.0.77")
    assert refused.returncode == 1 and "404" in refused.stderr, refused.stderr
    cli.ok("server", "remove", "fixed", "ip", "--os-compute-api-version", "2.43", "cli-net", "10.1.0.77")
    # as Nova's removeFixedIp with Neutron: the address taken off the server's port, the port kept
    _until(lambda: "10.1.0.77" not in json.dumps(neutron.ports[shown["Port ID"]]["fixed_ips"]), "the address off")
    assert neutron.ports[shown["Port ID"]]["device_id"] == uuid
    _until(lambda: "10.1.0.77" not in json.dumps(stack.call("GET", f"/v2.1/servers/{uuid}")[1]["server"]["addresses"]),
           "the address gone from the server's")
    assert stack.call("GET", f"/v2.1/servers/{uuid}")[1]["server"]["status"] == "ACTIVE"
    actions = [a["action"] for a in stack.call("GET", f"/v2.1/servers/{uuid}/os-instance-actions")[1][
        "instanceActions"]]
    assert (actions.count("attach_interface"), actions.count("detach_interface")) == (3, 2), actions

    cli.ok("server", "delete", "--wait", "cli-net")
    assert ports() == {}
