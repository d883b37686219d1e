"""``security_groups`` in server bodies with [neutron] set (the in-memory Neutron over HTTP): the groups of
the server's ports as Nova 34.0.0's view reads them (nova/network/security_group_api.py
get_instances_security_groups_bindings), not the names kept at boot. Compared with the servers oracle
(its NeutronFixture): a server on two ports of the ``default`` group shows it twice, port after port; a
server booted with ``networks: none`` shows no key; GET /servers never shows it; show puts the key after
``OS-SRV-USG:terminated_at``, a detail item last (after ``host_status``); PUT and rebuild show it from 2.75
only."""

from __future__ import annotations

import contextlib
import socket

import pytest
import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.api.servers.helpers import IMAGE, local_image_service
from tests.conftest import admin, make_conf, user

PROJECT = "demo"
UUID = "5e7ac6a4-9d0e-4d52-8f0e-6c3b1c9f2a10"


@contextlib.contextmanager
def _served(tmp_path, neutron_url: str):
    """The API with [neutron] at ``neutron_url``, the flavor and the image to boot."""
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from openkeel_compute.catalog import flavors as catalog
    from tests.wsgi_client import Client

    policies.reset()
    conf = make_conf(tmp_path, neutron={"auth_type": "admin_token", "endpoint": neutron_url, "token": "neutron-admin",
                                        "endpoint_override": neutron_url, "http_retries": "0"})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
    try:
        with local_image_service(conf, tmp_path):
            yield Client(deploy(conf)), engine
    finally:
        db_api.dispose_all()
        policies.reset()


@pytest.fixture
def world(tmp_path, neutron):
    with _served(tmp_path, neutron.url) as (client, engine):
        yield client, engine, neutron


def _h(version="2.1"):
    return user(PROJECT, name="demo", version=version)


def _boot(world, net, **fields) -> str:
    """A server booted through the API (its ``default`` group kept by name), then placed and ACTIVE."""
    client, engine, _neutron = world
    body = {"name": "s", "imageRef": IMAGE, "flavorRef": "1", "networks": [{"uuid": net["id"]}], **fields}
    resp = client.post("/v2.1/servers", headers=_h("2.37"), json_body={"server": body})
    assert resp.status_code == 202, resp.json
    uuid = resp.json["server"]["id"]
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(
            host="node-1", node="node-1", vm_state="active", task_state=None, power_state=1, launched_at=models.utcnow()))
    return uuid


def _show(client, uuid, version="2.1"):
    resp = client.get(f"/v2.1/servers/{uuid}", headers=_h(version))
    assert resp.status_code == 200, resp.json
    return resp.json["server"]


def _gets(neutron, since=0):
    return [(r["path"], r["query"]) for r in neutron.requests[since:] if r["method"] == "GET"]


def test_show_follows_the_groups_of_the_ports(world):
    client, _engine, neutron = world
    net = neutron.network()
    default, web = neutron.security_group("default"), neutron.security_group("web")
    uuid = _boot(world, net)
    first = neutron.port(net, device_id=uuid, security_groups=[default["id"]])
    second = neutron.port(net, device_id=uuid, security_groups=[default["id"], web["id"]])
    server = _show(client, uuid)
    # port after port, the same group again for each port that has it (as the oracle's two-port server)
    assert server["security_groups"] == [{"name": "default"}, {"name": "default"}, {"name": "web"}]
    keys = list(server)
    assert keys[keys.index("OS-SRV-USG:terminated_at") + 1] == "security_groups"

    # the groups changed in Neutron itself: the next show has them
    first["security_groups"], second["security_groups"] = [web["id"]], []
    assert _show(client, uuid)["security_groups"] == [{"name": "web"}]
    # no group left on any port: no key (the names kept at boot say "default")
    first["security_groups"] = []
    assert "security_groups" not in _show(client, uuid)

    # one ports query (the server's, two fields) and, with groups, one groups query (id and name)
    first["security_groups"] = [web["id"]]
    before = len(neutron.requests)
    _show(client, uuid, "2.96")
    assert _gets(neutron, before) == [
        ("/v2.0/ports", {"device_id": [uuid], "fields": ["security_groups", "device_id"]}),
        ("/v2.0/security-groups", {"id": [web["id"]], "fields": ["id", "name"]})]
    assert {r["token"] for r in neutron.requests[before:]} == {"demo:demo"}  # the caller's token


def test_show_through_add_and_remove_security_group(world):
    client, _engine, neutron = world
    net = neutron.network()
    default = neutron.security_group("default")
    neutron.security_group("web")
    uuid = _boot(world, net)
    neutron.port(net, device_id=uuid, security_groups=[default["id"]])
    act = f"/v2.1/servers/{uuid}/action"
    assert client.post(act, headers=_h(), json_body={"addSecurityGroup": {"name": "web"}}).status_code == 202
    assert _show(client, uuid)["security_groups"] == [{"name": "default"}, {"name": "web"}]
    assert client.post(act, headers=_h(), json_body={"removeSecurityGroup": {"name": "web"}}).status_code == 202
    assert _show(client, uuid)["security_groups"] == [{"name": "default"}]
    assert client.post(act, headers=_h(), json_body={"removeSecurityGroup": {"name": "default"}}).status_code == 202
    assert "security_groups" not in _show(client, uuid)


def test_a_server_without_ports_shows_none(world):
    client, _engine, neutron = world
    net = neutron.network()
    neutron.security_group("default")
    uuid = _boot(world, net)  # "default" kept at boot, but no port has it
    assert "security_groups" not in _show(client, uuid)
    portless = _boot(world, net, networks="none")  # as the oracle's server booted with networks none
    assert "security_groups" not in _show(client, portless)
    resp = client.get("/v2.1/servers/detail", headers=_h())
    assert all("security_groups" not in s for s in resp.json["servers"])


def test_nameless_and_unseen_groups(world):
    client, _engine, neutron = world
    net = neutron.network()
    nameless = neutron.security_group("")
    gone = neutron.security_group("gone")
    uuid = _boot(world, net)
    neutron.port(net, device_id=uuid, security_groups=[gone["id"], nameless["id"]])
    del neutron.security_groups[gone["id"]]  # a group Neutron does not show the caller is left out
    assert _show(client, uuid)["security_groups"] == [{"name": nameless["id"]}]  # no name: its id


def test_detail_reads_the_page_in_one_ports_query(world):
    client, _engine, neutron = world
    net = neutron.network()
    default, web = neutron.security_group("default"), neutron.security_group("web")
    uuids = [_boot(world, net) for _ in range(3)]
    neutron.port(net, device_id=uuids[0], security_groups=[default["id"]])
    neutron.port(net, device_id=uuids[1], security_groups=[web["id"], default["id"]])
    before = len(neutron.requests)
    resp = client.get("/v2.1/servers/detail", headers=_h("2.16"))
    assert resp.status_code == 200
    got = {s["id"]: s.get("security_groups") for s in resp.json["servers"]}
    assert got == {uuids[0]: [{"name": "default"}], uuids[1]: [{"name": "web"}, {"name": "default"}],
                   uuids[2]: None}
    assert all(list(s)[-1] == "security_groups" for s in resp.json["servers"] if s["id"] != uuids[2])
    calls = _gets(neutron, before)
    assert [path for path, _query in calls] == ["/v2.0/ports", "/v2.0/security-groups"]
    assert sorted(calls[0][1]["device_id"]) == sorted(uuids)
    assert sorted(calls[1][1]["id"]) == sorted([default["id"], web["id"]])

    # an admin's detail page: host_status, then the groups last
    resp = client.get("/v2.1/servers/detail?all_tenants=1", headers=admin(version="2.16"))
    server = next(s for s in resp.json["servers"] if s["id"] == uuids[0])
    assert list(server)[-2:] == ["host_status", "security_groups"]

    # the page is not kept: a group changed in Neutron shows on the next page
    neutron.port(net, device_id=uuids[2], security_groups=[web["id"]])
    resp = client.get("/v2.1/servers/detail", headers=_h("2.16"))
    assert {s["id"]: s.get("security_groups") for s in resp.json["servers"]}[uuids[2]] == [{"name": "web"}]

    # GET /servers shows no groups and asks Neutron nothing
    before = len(neutron.requests)
    resp = client.get("/v2.1/servers", headers=_h())
    assert all("security_groups" not in s for s in resp.json["servers"])
    assert len(neutron.requests) == before


def test_put_and_rebuild_show_the_groups_from_2_75(world):
    client, _engine, neutron = world
    net = neutron.network()
    neutron.security_group("default")
    web = neutron.security_group("web")
    uuid = _boot(world, net)  # "default" kept at boot; its port is in "web"
    neutron.port(net, device_id=uuid, security_groups=[web["id"]])
    before = len(neutron.requests)
    resp = client.put(f"/v2.1/servers/{uuid}", headers=_h("2.74"), json_body={"server": {"name": "t"}})
    assert "security_groups" not in resp.json["server"]
    assert len(neutron.requests) == before  # nothing asked where nothing is shown
    resp = client.put(f"/v2.1/servers/{uuid}", headers=_h("2.75"), json_body={"server": {"name": "t"}})
    assert resp.json["server"]["security_groups"] == [{"name": "web"}]
    resp = client.post(f"/v2.1/servers/{uuid}/action", headers=_h("2.75"), json_body={"rebuild": {"imageRef": IMAGE}})
    assert resp.status_code == 202, resp.json
    assert resp.json["server"]["security_groups"] == [{"name": "web"}]


_UNEXPECTED = "Unexpected API Error. Please contact the administrator\n<class 'neutronclient.common.exceptions.{}'>"
_WEBOB_401 = ("This server could not verify that you are authorized to access the document you requested. Either "
              "you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to "
              "supply the credentials required.")


@pytest.mark.parametrize(("status", "code", "message"), [
    # Nova answers its generic 500 naming neutronclient's exception: its defect; a failing Neutron is a 503
    (500, 503, "Neutron answered 500"),
    (503, 503, "Neutron answered 503"),
    (404, 503, "Neutron answered 404"),
    (401, 401, _WEBOB_401),
])
def test_neutron_failing_fails_show_and_detail(world, status, code, message):
    client, _engine, neutron = world
    net = neutron.network()
    uuid = _boot(world, net)
    neutron.fail_with = status
    name = {503: "serviceUnavailable", 401: "unauthorized"}[code]
    for path in (f"/v2.1/servers/{uuid}", "/v2.1/servers/detail"):
        resp = client.get(path, headers=_h())
        assert (resp.status_code, list(resp.json)) == (code, [name]), resp.json
        assert resp.json[name]["message"].startswith(message), resp.json
    assert client.get("/v2.1/servers", headers=_h()).status_code == 200  # no Neutron call there


def test_neutron_forbidding_is_passed_on(world):
    client, _engine, neutron = world
    uuid = _boot(world, neutron.network())
    neutron.fail_with = 403
    resp = client.get(f"/v2.1/servers/{uuid}", headers=_h())
    assert resp.status_code == 403
    assert resp.json["forbidden"]["message"].startswith(
        "Request Failed: internal server error\nNeutron server returns request_ids: ['req-")


def test_neutron_unreachable(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with _served(tmp_path, f"http://127.0.0.1:{closed}") as (client, engine):
        with db_api.transaction(engine) as conn:
            conn.execute(sa.insert(models.INSTANCES), {
                "uuid": UUID, "project_id": PROJECT, "user_id": "demo", "display_name": "s", "hostname": "s",
                "host": "node-1", "node": "node-1", "vm_state": "active", "power_state": 1, "memory_mb": 64,
                "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "instance_type_id": 1, "created_at": models.utcnow(),
                "launch_index": 0, "deleted": 0, "availability_zone": "nova"})
        # Nova answers its generic 500 naming keystoneauth's ConnectFailure; a Neutron away is a 503
        resp = client.get(f"/v2.1/servers/{UUID}", headers=_h())
        assert resp.status_code == 503, resp.json
        assert "Neutron" in resp.json["serviceUnavailable"]["message"], resp.json


def test_ids_are_asked_150_at_a_time():
    """Nova's MAX_SEARCH_IDS: a page of 151 servers is two ports queries; a deleted port is no port."""
    from openkeel_compute.network import errors, port_groups

    class Calls:
        def __init__(self):
            self.asked = []

        def list_ports(self, device_id, fields):
            self.asked.append(("ports", len(device_id)))
            if len(self.asked) == 1:
                raise errors.NeutronError("Port p could not be found.", 404, "PortNotFound")
            return [{"device_id": u, "security_groups": [f"g{i}"]} for i, u in enumerate(device_id)]

        def list_security_groups(self, id, fields):
            self.asked.append(("groups", len(id)))
            return [{"id": g, "name": g} for g in id]

    calls = Calls()
    uuids = [f"s{i}" for i in range(151)]
    assert port_groups.by_server(calls, uuids) == {"s150": [{"id": "g0", "name": "g0"}]}
    assert calls.asked == [("ports", 150), ("ports", 1), ("groups", 1)]
