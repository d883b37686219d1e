"""The openstack client and openstacksdk against OpenKeel's API with a real Keystone and a real Neutron 29
(the session's, tests/network/shared_neutron.py): the API is served over HTTP with keystonemiddleware, the
controller runs its passes in a thread on the built-in cluster, and the clients authenticate at Keystone
as its demo user, take Neutron from Keystone's catalog and reach the API and the local image service by
endpoint overrides (the catalog here has no compute or image entry). Servers booted with ``--network
<name>`` and ``--nic port-id=<id>`` come up ACTIVE with their ports bound to the node with Nova's fields;
``server add/remove security group`` change the port's groups in Neutron (``server show`` lists them);
``port list --server`` finds the server's port; openstacksdk does the same with ``networks=[{"uuid"}]`` / ``[{"port"}]``."""

from __future__ import annotations

import json
import os
import pathlib
import socketserver
import subprocess
import threading
import types
import uuid as uuidlib
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from openkeel_compute.api.deploy import deploy
from openkeel_compute.controller import providers
from openkeel_compute.controller.claims import Claims
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator import Delays, Emulator
from openkeel_compute.images import glance
from openkeel_compute.network.client import NeutronClient
from openkeel_compute.placement import embedded
from openkeel_compute.placement.client import PlacementClient
from tests.clients.conftest import BIN
from tests.conftest import make_conf
from tests.controller.helpers import controller_for
from tests.network.test_real_neutron import _env
from tests.network.test_real_neutron_interfaces import NODES, _agents, _token
from tests.server_world import IMAGE, controller_running, image_service, reset_placement
from tests.volume.fake_cinder import FakeCinder

pytestmark = pytest.mark.xdist_group("real-neutron")
WAIT = 120


class _ThreadedServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def stack(tmp_path_factory, real_neutron_dir, placement_service):
    """The served API (keystone auth) with the controller running, the Neutron admin client, the CLI's env."""
    from openkeel_compute import policies

    tmp = tmp_path_factory.mktemp("real-neutron-clients")
    base = pathlib.Path(real_neutron_dir)
    ks, nets = _env(base / "harness" / "keystone.env"), _env(base / "networks.env")
    _agents(base)
    admin_token, _ = _token(ks, "ADMIN")
    _, project = _token(ks, "DEMO")
    service = {"auth_type": "password", "auth_url": ks["KEYSTONE_URL"], "username": ks["SERVICE_USERNAME"],
               "password": ks["SERVICE_PASSWORD"], "project_name": ks["SERVICE_PROJECT_NAME"],
               "user_domain_name": "Default", "project_domain_name": "Default", "region_name": "RegionOne"}
    policies.reset()
    cinder = FakeCinder()
    cinder_server, cinder.url = cinder.serve()
    conf = make_conf(tmp, auth_strategy="keystone", controller={"poll_interval": "0.05", "workers": "4"},
                     DEFAULT={"vif_plugging_timeout": "0"}, neutron=service,
                     cinder={**service, "endpoint_template": cinder.url + "/v3/%(project_id)s"},
                     keystone_authtoken={**service, "www_authenticate_uri": ks["KEYSTONE_URL"].removesuffix("/v3"),
                                         "interface": "public", "service_type": "compute"})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    with image_service(tmp) as images_url:
        glance.register_opts(conf)
        conf.set_override("api_servers", [images_url], group="glance")
        network = NeutronClient(conf)
        cluster = Emulator(delays=Delays.fast(), tick=0.01, nodes=len(NODES)).start()
        kube = make_client(cluster.kubeconfig())
        servers = server_loop_from(conf, engine, kube)  # Neutron and Cinder as the controller's configuration has them
        placement = PlacementClient.for_endpoint(placement_service, embedded.TOKEN)
        reset_placement(placement)
        providers.sync(placement, [o for k, o in cluster.objects("Node").items()])
        servers.claims = Claims(placement)
        controller = controller_for(conf, cluster, servers=servers)
        httpd = make_server("127.0.0.1", 0, deploy(conf), server_class=_ThreadedServer, handler_class=_Quiet)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_port}/v2.1"
        clouds = tmp / "clouds.yaml"
        clouds.write_text(
            "clouds:\n"
            "  demo:\n"
            "    auth:\n"
            f"      auth_url: {ks['KEYSTONE_URL']}\n"
            f"      username: {ks['DEMO_USERNAME']}\n"
            f"      password: {ks['DEMO_PASSWORD']}\n"
            f"      project_name: {ks['DEMO_PROJECT_NAME']}\n"
            "      user_domain_name: Default\n"
            "      project_domain_name: Default\n"
            "    region_name: RegionOne\n"
            "    identity_api_version: '3'\n"
            f"    compute_endpoint_override: {url}\n"
            f"    image_endpoint_override: {images_url}\n"
            f"    block_storage_endpoint_override: {cinder.url}/v3/{project}\n"
            "    block_storage_api_version: '3'\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env.update(OS_CLIENT_CONFIG_FILE=str(clouds), OS_CLOUD="demo", PYTHONWARNINGS="ignore", HOME=str(tmp))
        flavor = {"flavor": {"name": "m1.cli", "ram": 512, "vcpus": 1, "disk": 1, "id": "cli"}}
        try:
            with controller_running(controller):
                stack = types.SimpleNamespace(url=url, neutron=network.admin(), nets=nets, project=project, env=env,
                                              clouds=clouds, admin=admin_token, cinder=cinder)
                _call(stack, "POST", "/flavors", flavor, token=admin_token)
                yield stack
        finally:
            httpd.shutdown()
            httpd.server_close()
            cinder_server.shutdown()
            cinder_server.server_close()
            controller.backend.close()
            kube.close()
            cluster.stop()
            db_api.dispose_all()
            policies.reset()


def _call(stack, method, path, body=None, *, token=None, version="2.1"):
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(stack.url + path, data=data, method=method, headers={
        "X-Auth-Token": token or stack.admin, "OpenStack-API-Version": f"compute {version}",
        "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


def _cli(stack, *args):
    got = subprocess.run([str(BIN / "openstack"), *args], check=False, env=stack.env, capture_output=True,
                         text=True, timeout=WAIT + 60, stdin=subprocess.DEVNULL)
    assert got.returncode == 0, f"openstack {' '.join(args)} -> {got.returncode}\n{got.stderr}"
    return json.loads(got.stdout) if got.stdout.strip() else None


def _cli_text(stack, *args):
    got = subprocess.run([str(BIN / "openstack"), *args], check=False, env=stack.env, capture_output=True,
                         text=True, timeout=WAIT + 60, stdin=subprocess.DEVNULL)
    assert got.returncode == 0, f"openstack {' '.join(args)} -> {got.returncode}\n{got.stderr}"
    return got.stdout


def _delete_servers(stack, *uuids):
    import time

    for uuid in uuids:
        _call(stack, "DELETE", f"/servers/{uuid}")
    deadline = time.monotonic() + 60
    while uuids and time.monotonic() < deadline and any(_call(stack, "GET", f"/servers/{u}")[0] != 404
                                                        for u in uuids):
        time.sleep(0.2)


def _bound(stack, port, uuid, node):
    """The port bound to the server's node with Nova's fields."""
    assert (port["device_id"], port["device_owner"], port["binding:host_id"], port["binding:vif_type"]) == (
        uuid, "compute:nova", node, "ovs")


def _group(stack, name):
    group = stack.neutron.request("POST", "/security-groups", ok=(201,), body={"security_group": {
        "name": name, "project_id": stack.project}})["security_group"]
    return group


def _default_group(stack):
    found = stack.neutron.request("GET", f"/security-groups?project_id={stack.project}&name=default")
    return found["security_groups"][0]["id"]


def test_openstack_cli_networks_ports_and_security_groups(stack):
    neutron, tag = stack.neutron, uuidlib.uuid4().hex[:6]
    group = _group(stack, f"okc-web-{tag}")
    user_port = neutron.request("POST", "/ports", ok=(201,), body={"port": {
        "network_id": stack.nets["PRIVATE_NETWORK_ID"], "project_id": stack.project,
        "name": f"okc-cli-{tag}"}})["port"]
    made = []
    try:
        # --network <name>: the CLI finds the network in Neutron by name
        server = _cli(stack, "server", "create", "--flavor", "m1.cli", "--image", IMAGE, "--network", "private",
                      "--wait", "-f", "json", f"cli-net-{tag}")
        made.append(server["id"])
        assert server["status"] == "ACTIVE"
        node = _call(stack, "GET", f"/servers/{server['id']}")[1]["server"]["OS-EXT-SRV-ATTR:host"]
        assert node in NODES
        [port] = neutron.list_ports(device_id=server["id"])
        _bound(stack, port, server["id"], node)
        assert server["addresses"] == {"private": [port["fixed_ips"][0]["ip_address"]]}
        assert port["network_id"] == stack.nets["PRIVATE_NETWORK_ID"]
        assert port["security_groups"] == [_default_group(stack)]

        # port list --server <name>: the compute lookup, then Neutron's ports by device_id
        listed = _cli(stack, "port", "list", "--server", f"cli-net-{tag}", "-f", "json")
        assert [p["ID"] for p in listed] == [port["id"]]

        # server add / remove security group: the port's groups in Neutron
        _cli(stack, "server", "add", "security", "group", f"cli-net-{tag}", f"okc-web-{tag}")
        got = neutron.list_ports(id=port["id"])[0]
        assert sorted(got["security_groups"]) == sorted([_default_group(stack), group["id"]])
        # server show: the groups of the server's port, as Nova's view reads them from Neutron
        shown = _cli(stack, "server", "show", "-f", "json", f"cli-net-{tag}")["security_groups"]
        assert sorted(g["name"] for g in shown) == sorted(["default", f"okc-web-{tag}"]), shown
        _cli(stack, "server", "remove", "security", "group", f"cli-net-{tag}", f"okc-web-{tag}")
        assert neutron.list_ports(id=port["id"])[0]["security_groups"] == [_default_group(stack)]
        shown = _cli(stack, "server", "show", "-f", "json", f"cli-net-{tag}")["security_groups"]
        assert [g["name"] for g in shown] == ["default"], shown

        # --nic port-id=<id>: the project's own port, bound to the node and kept after the server
        server = _cli(stack, "server", "create", "--flavor", "m1.cli", "--image", IMAGE, "--nic",
                      f"port-id={user_port['id']}", "--wait", "-f", "json", f"cli-port-{tag}")
        made.append(server["id"])
        assert server["status"] == "ACTIVE"
        node = _call(stack, "GET", f"/servers/{server['id']}")[1]["server"]["OS-EXT-SRV-ATTR:host"]
        _bound(stack, neutron.list_ports(id=user_port["id"])[0], server["id"], node)
        assert server["addresses"] == {"private": [user_port["fixed_ips"][0]["ip_address"]]}
        listed = _cli(stack, "port", "list", "--server", server["id"], "-f", "json")
        assert [p["ID"] for p in listed] == [user_port["id"]]
        _delete_servers(stack, server["id"])
        kept = neutron.list_ports(id=user_port["id"])[0]
        assert (kept["device_id"], kept["device_owner"], kept["binding:host_id"]) == ("", "", "")
    finally:
        _delete_servers(stack, *made)
        neutron.request("DELETE", f"/ports/{user_port['id']}", ok=(204, 404))
        neutron.request("DELETE", f"/security-groups/{group['id']}", ok=(204, 404))


def test_openstacksdk_networks_ports_and_security_groups(stack):
    import openstack.config
    import openstack.connection

    neutron, tag = stack.neutron, uuidlib.uuid4().hex[:6]
    region = openstack.config.OpenStackConfig(config_files=[str(stack.clouds)], load_envvars=False).get_one(
        cloud="demo")
    conn = openstack.connection.Connection(config=region)
    group = _group(stack, f"okc-sdk-{tag}")
    user_port = conn.network.create_port(network_id=stack.nets["PRIVATE_NETWORK_ID"], name=f"okc-sdk-{tag}")
    made = []
    try:
        flavor = conn.compute.find_flavor("m1.cli", ignore_missing=False)
        server = conn.compute.create_server(name=f"sdk-net-{tag}", flavor_id=flavor.id, image_id=IMAGE,
                                            networks=[{"uuid": stack.nets["PRIVATE_NETWORK_ID"]}])
        made.append(server.id)
        other = conn.compute.create_server(name=f"sdk-port-{tag}", flavor_id=flavor.id, image_id=IMAGE,
                                           networks=[{"port": user_port.id}])
        made.append(other.id)
        server = conn.compute.wait_for_server(server, status="ACTIVE", wait=WAIT, interval=0.5)
        other = conn.compute.wait_for_server(other, status="ACTIVE", wait=WAIT, interval=0.5)

        # the binding as Neutron's admin sees it (the demo user is not shown binding:*)
        [port] = neutron.list_ports(device_id=server.id)
        node = _call(stack, "GET", f"/servers/{server.id}")[1]["server"]["OS-EXT-SRV-ATTR:host"]
        _bound(stack, port, server.id, node)
        assert port["network_id"] == stack.nets["PRIVATE_NETWORK_ID"]
        assert server.addresses["private"][0]["addr"] == port["fixed_ips"][0]["ip_address"]
        node = _call(stack, "GET", f"/servers/{other.id}")[1]["server"]["OS-EXT-SRV-ATTR:host"]
        _bound(stack, neutron.list_ports(id=user_port.id)[0], other.id, node)
        assert [p.id for p in conn.network.ports(device_id=other.id)] == [user_port.id]
        assert [i.port_id for i in conn.compute.server_interfaces(other)] == [user_port.id]

        conn.compute.add_security_group_to_server(server, group)
        assert sorted(conn.network.get_port(port["id"]).security_group_ids) == sorted(
            [_default_group(stack), group["id"]])
        assert sorted(g["name"] for g in conn.compute.fetch_server_security_groups(server).security_groups) == sorted(
            ["default", f"okc-sdk-{tag}"])  # os-security-groups: the groups of the server's ports
        conn.compute.remove_security_group_from_server(server, group)
        assert conn.network.get_port(port["id"]).security_group_ids == [_default_group(stack)]
    finally:
        _delete_servers(stack, *made)
        conn.network.delete_port(user_port.id, ignore_missing=True)
        neutron.request("DELETE", f"/security-groups/{group['id']}", ok=(204, 404))
        conn.close()


def _attached(cli_volumes, volume_id):
    return next(v["Attached to"] for v in cli_volumes if v["ID"] == volume_id)


def test_openstack_cli_volumes(stack):
    """Boot from a volume (``--volume``, ``--block-device``), ``server add/remove volume`` and ``volume
    list`` from the in-memory Cinder the API and the controller use ([cinder] endpoint_template) and the
    CLI reaches by its block-storage endpoint override."""
    cinder, tag = stack.cinder, uuidlib.uuid4().hex[:6]
    boot = cinder.volume(size=1, bootable=True, name=f"boot-{tag}", image_metadata={"image_id": IMAGE})
    other = cinder.volume(size=1, bootable=True, name=f"other-{tag}", image_metadata={"image_id": IMAGE})
    data = cinder.volume(size=1, name=f"data-{tag}")
    made = []
    try:
        server = _cli(stack, "server", "create", "--flavor", "m1.cli", "--volume", boot["id"], "--network",
                      "private", "--wait", "-f", "json", f"cli-vol-{tag}")
        made.append(server["id"])
        assert server["status"] == "ACTIVE"
        assert cinder.volumes[boot["id"]]["status"] == "in-use"
        assert [a["server_id"] for a in cinder.volumes[boot["id"]]["attachments"]] == [server["id"]]
        shown = _cli(stack, "server", "show", server["id"], "-f", "json")
        assert [v["id"] for v in shown["volumes_attached"]] == [boot["id"]]

        attached = _cli(stack, "server", "add", "volume", f"cli-vol-{tag}", data["id"], "-f", "json")
        assert (attached["Volume ID"], attached["Server ID"]) == (data["id"], shown["id"]), attached
        listed = _cli(stack, "server", "volume", "list", f"cli-vol-{tag}", "-f", "json")
        assert sorted(v["Volume ID"] for v in listed) == sorted([boot["id"], data["id"]])
        import time

        deadline = time.monotonic() + WAIT
        while cinder.volumes[data["id"]]["status"] != "in-use" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cinder.volumes[data["id"]]["status"] == "in-use"
        volumes = _cli(stack, "volume", "list", "-f", "json")
        assert [a["server_id"] for a in _attached(volumes, data["id"])] == [shown["id"]]
        assert [a["server_id"] for a in _attached(volumes, boot["id"])] == [shown["id"]]
        rendered = _cli_text(stack, "volume", "list", "-f", "table", "-c", "ID", "-c", "Attached to")
        line = next(line for line in rendered.splitlines() if data["id"] in line)
        assert f"Attached to cli-vol-{tag} on /dev/vdb" in line, rendered  # the server's name, from compute

        _cli(stack, "server", "remove", "volume", f"cli-vol-{tag}", data["id"])
        deadline = time.monotonic() + WAIT
        while cinder.volumes[data["id"]]["status"] != "available" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cinder.volumes[data["id"]]["status"] == "available"
        volumes = _cli(stack, "volume", "list", "-f", "json")
        assert _attached(volumes, data["id"]) == []

        server = _cli(stack, "server", "create", "--flavor", "m1.cli", "--block-device",
                      f"uuid={other['id']},source_type=volume,destination_type=volume,boot_index=0",
                      "--network", "private", "--wait", "-f", "json", f"cli-bdm-{tag}")
        made.append(server["id"])
        assert server["status"] == "ACTIVE"
        assert [a["server_id"] for a in cinder.volumes[other["id"]]["attachments"]] == [server["id"]]
        _delete_servers(stack, *made)
        assert (cinder.volumes[boot["id"]]["status"], cinder.volumes[other["id"]]["status"]) == (
            "available", "available")
    finally:
        _delete_servers(stack, *made)


def test_openstacksdk_volumes(stack):
    """openstacksdk: a boot from a volume (block_device_mapping), a volume attached and detached
    (create/delete_volume_attachment), and block_storage's volumes showing the attachment."""
    import time

    import openstack.config
    import openstack.connection

    cinder, tag = stack.cinder, uuidlib.uuid4().hex[:6]
    boot = cinder.volume(size=1, bootable=True, name=f"sdk-boot-{tag}", image_metadata={"image_id": IMAGE})
    data = cinder.volume(size=1, name=f"sdk-data-{tag}")
    region = openstack.config.OpenStackConfig(config_files=[str(stack.clouds)], load_envvars=False).get_one(
        cloud="demo")
    conn = openstack.connection.Connection(config=region)
    made = []
    try:
        flavor = conn.compute.find_flavor("m1.cli", ignore_missing=False)
        server = conn.compute.create_server(name=f"sdk-vol-{tag}", flavor_id=flavor.id, networks="none",
                                            block_device_mapping=[{"uuid": boot["id"], "source_type": "volume",
                                                                   "destination_type": "volume", "boot_index": 0}])
        made.append(server.id)
        server = conn.compute.wait_for_server(server, status="ACTIVE", wait=WAIT, interval=0.5)
        assert [v["id"] for v in server.attached_volumes] == [boot["id"]]
        assert [a["server_id"] for a in conn.block_storage.get_volume(boot["id"]).attachments] == [server.id]

        conn.compute.create_volume_attachment(server, volume_id=data["id"])
        deadline = time.monotonic() + WAIT
        while conn.block_storage.get_volume(data["id"]).status != "in-use" and time.monotonic() < deadline:
            time.sleep(0.2)
        volume = conn.block_storage.get_volume(data["id"])
        assert (volume.status, [a["server_id"] for a in volume.attachments]) == ("in-use", [server.id])
        assert sorted(a.volume_id for a in conn.compute.volume_attachments(server)) == sorted(
            [boot["id"], data["id"]])
        conn.compute.delete_volume_attachment(server, data["id"])
        deadline = time.monotonic() + WAIT
        while conn.block_storage.get_volume(data["id"]).status != "available" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert conn.block_storage.get_volume(data["id"]).attachments == []
        assert [v["id"] for v in conn.compute.get_server(server.id).attached_volumes] == [boot["id"]]
    finally:
        _delete_servers(stack, *made)
        conn.close()
