"""POST and DELETE /servers/{id}/os-interface as Nova 34.0.0 answers them (compared with the servers oracle:
its NeutronFixture's answers, the body checks, the tag from 2.49, port in use, unknown port, 202 for a port
the server does not have), on every database engine: the API makes or takes the port with Nova's fields,
records the interface and the ``attach_interface`` action and asks the controller; each refusal has Nova's
words, records the compute event in "Error" where Nova's compute refuses, and writes nothing else."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import network_requests
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.conftest import admin, make_conf, user
from tests.databases import ENGINES, throwaway_database

PROJECT = "demo"


def _server(engine, project=PROJECT, **fields) -> str:
    ident = str(uuid.uuid4())
    now = models.utcnow()
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.INSTANCES), {
            "uuid": ident, "project_id": project, "user_id": "demo", "display_name": "s", "hostname": "s",
            "host": "node-1", "node": "node-1", "vm_state": "active", "power_state": 1, "memory_mb": 64, "vcpus": 1,
            "root_gb": 1, "ephemeral_gb": 0, "instance_type_id": 1, "created_at": now, "launched_at": now,
            "launch_index": 0, "deleted": 0, "locked": False, **fields})
    return ident


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, neutron):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    policies.reset()
    with throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url},
                         neutron={"auth_type": "admin_token", "endpoint": neutron.url, "token": "neutron-admin",
                                  "endpoint_override": neutron.url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        yield Client(deploy(conf)), engine, neutron
        db_api.dispose_all()
    policies.reset()


def _attach(client, server, body, version="2.1", headers=None):
    return client.post(f"/v2.1/servers/{server}/os-interface", json_body=body,
                       headers=headers or user(PROJECT, name="demo", version=version))


def _written(engine, server):
    """(outbox operations, interfaces recorded, [(action, [(event, result)])]) of the server."""
    with db_api.reader(engine) as conn:
        outbox = [(r.operation, r.payload.get("port_id")) for r in conn.execute(
            sa.select(models.OUTBOX).where(models.OUTBOX.c.object_id == server).order_by(models.OUTBOX.c.id))]
        requests = network_requests.of(conn, server)
        actions = []
        for action in conn.execute(sa.select(models.INSTANCE_ACTIONS).where(
                models.INSTANCE_ACTIONS.c.instance_uuid == server).order_by(models.INSTANCE_ACTIONS.c.id)):
            evs = conn.execute(sa.select(models.INSTANCE_ACTIONS_EVENTS.c.event, models.INSTANCE_ACTIONS_EVENTS.c.result)
                               .where(models.INSTANCE_ACTIONS_EVENTS.c.action_id == action.id)).all()
            actions.append((action.action, [tuple(e) for e in evs]))
    return outbox, requests, actions


def test_attach_on_a_network_makes_the_port(world):
    client, engine, neutron = world
    server = _server(engine)
    net = neutron.network(project_id=PROJECT)
    resp = _attach(client, server, {"interfaceAttachment": {"net_id": net["id"], "tag": "nic-b"}}, "2.70")
    assert resp.status_code == 200, resp.json
    port = next(p for p in neutron.ports.values() if p["device_id"] == server)
    assert resp.json == {"interfaceAttachment": {
        "net_id": net["id"], "port_id": port["id"], "mac_addr": port["mac_address"], "port_state": "DOWN",
        "fixed_ips": port["fixed_ips"], "tag": "nic-b"}}
    created = next(r for r in neutron.requests if r["method"] == "POST")
    assert created["body"] == {"port": {"device_id": server, "network_id": net["id"], "admin_state_up": True,
                                        "tenant_id": PROJECT}}
    assert created["token"] == "demo:demo"  # the caller's token, as Nova's compute creates it
    outbox, requests, actions = _written(engine, server)
    assert outbox == [("attach-interface", port["id"])]
    assert [(r["position"], r["port_id"], r["tag"], r["port_created"]) for r in requests] == [
        (0, port["id"], "nic-b", True)]
    assert actions == [("attach_interface", [])]  # the controller starts and finishes the compute event
    listed = client.get(f"/v2.1/servers/{server}/os-interface", headers=user(PROJECT, name="demo", version="2.70"))
    assert listed.json["interfaceAttachments"][0]["tag"] == "nic-b"


def test_attach_takes_the_users_port_and_a_fixed_ip(world):
    client, engine, neutron = world
    server = _server(engine)
    net = neutron.network(project_id=PROJECT)
    theirs = neutron.port(net, project_id=PROJECT)
    resp = _attach(client, server, {"interfaceAttachment": {"port_id": theirs["id"]}})
    assert resp.status_code == 200
    assert resp.json["interfaceAttachment"]["port_id"] == theirs["id"]
    assert "tag" not in resp.json["interfaceAttachment"]
    assert neutron.ports[theirs["id"]]["device_id"] == server
    resp = _attach(client, server, {"interfaceAttachment": {"net_id": net["id"],
                                                            "fixed_ips": [{"ip_address": "10.0.0.77"}]}})
    assert resp.status_code == 200
    assert resp.json["interfaceAttachment"]["fixed_ips"][0]["ip_address"] == "10.0.0.77"
    _outbox, requests, _actions = _written(engine, server)
    assert [(r["position"], r["port_created"], r["fixed_ip"]) for r in requests] == [
        (0, False, None), (1, True, "10.0.0.77")]


def test_refusals_have_novas_words_and_leave_nothing(world):
    client, engine, neutron = world
    server = _server(engine)
    net = neutron.network(project_id=PROJECT)
    used = neutron.port(net, project_id=PROJECT, device_id="another-server")
    foreign = neutron.port(net, project_id="someone-else")
    taken = next(iter(neutron.ports.values()))["fixed_ips"][0]["ip_address"]
    unknown = str(uuid.uuid4())
    cases = [
        ({"port_id": used["id"], "net_id": net["id"]}, "2.1", 400, "Must not input both network_id and port_id", None),
        ({"fixed_ips": [{"ip_address": "10.0.0.9"}]}, "2.1", 400, "Must input network_id when request IP address",
         None),
        ({"port_id": unknown}, "2.1", 404, f"Port id {unknown} could not be found.", []),
        ({"port_id": used["id"]}, "2.1", 409, f"Port {used['id']} is still in use.", "Error"),
        ({"port_id": foreign["id"]}, "2.1", 400, f"Port {foreign['id']} not usable for instance {server}.", "Error"),
        ({"net_id": unknown}, "2.1", 404, f"Network {unknown} could not be found.", "Error"),
        ({"net_id": net["id"], "fixed_ips": [{"ip_address": taken}]}, "2.1", 409,
         f"Fixed IP {taken} is already in use.", "Error"),
    ]
    for body, version, status, message, event in cases:
        before = set(neutron.ports)
        resp = _attach(client, server, {"interfaceAttachment": body}, version)
        assert resp.status_code == status, (body, resp.json)
        assert next(iter(resp.json.values()))["message"] == message
        assert set(neutron.ports) == before
        _outbox, _requests, actions = _written(engine, server)
        if event is None:
            assert not actions or actions[-1] != ("attach_interface", None)
        elif event == []:
            assert actions[-1] == ("attach_interface", [])
        else:
            assert actions[-1] == ("attach_interface", [("compute_attach_interface", event)])
    resp = _attach(client, server, {"interfaceAttachment": {"net_id": net["id"], "tag": "x"}}, "2.48")
    assert resp.status_code == 400
    assert "Additional properties are not allowed ('tag' was unexpected)" in resp.json["badRequest"]["message"]
    outbox, requests, actions = _written(engine, server)
    assert (outbox, requests) == ([], [])
    assert len(actions) == 5  # the body's refusals and the schema's come before the action


def test_no_network_or_several(world):
    client, engine, neutron = world
    server = _server(engine)
    resp = _attach(client, server, {"interfaceAttachment": {}})
    assert (resp.status_code, resp.json["badRequest"]["message"]) == (
        400, f"No specific network was requested and none are available for project '{PROJECT}'.")
    only = neutron.network(project_id=PROJECT)
    resp = _attach(client, server, {"interfaceAttachment": {}})
    assert resp.status_code == 200
    assert resp.json["interfaceAttachment"]["net_id"] == only["id"]
    neutron.network(project_id=PROJECT)
    resp = _attach(client, server, {"interfaceAttachment": {}})
    assert (resp.status_code, resp.json["badRequest"]["message"]) == (
        400, "Multiple possible networks found, use a Network ID to be more specific.")


def test_lock_and_states(world):
    client, engine, neutron = world
    net = neutron.network(project_id=PROJECT)
    locked = _server(engine, locked=True)
    shelved = _server(engine, vm_state="shelved")
    busy = _server(engine, task_state="rebooting")
    body = {"interfaceAttachment": {"net_id": net["id"]}}
    resp = _attach(client, locked, body)
    assert (resp.status_code, resp.json["conflictingRequest"]["message"]) == (409, f"Instance {locked} is locked")
    assert _attach(client, locked, body, headers=admin("2.1")).status_code == 200  # an admin passes the lock
    resp = _attach(client, shelved, body)
    assert (resp.status_code, resp.json["conflictingRequest"]["message"]) == (
        409, f"Cannot 'attach_interface' instance {shelved} while it is in vm_state shelved")
    resp = _attach(client, busy, body)
    assert (resp.status_code, resp.json["conflictingRequest"]["message"]) == (
        409, f"Cannot 'attach_interface' instance {busy} while it is in task_state rebooting")
    stopped = _server(engine, vm_state="stopped", power_state=4)
    assert _attach(client, stopped, body).status_code == 200
    for server in (shelved, busy):
        resp = client.delete(f"/v2.1/servers/{server}/os-interface/{uuid.uuid4()}", headers=user(PROJECT, name="demo"))
        assert resp.status_code == 409
        assert f"Cannot 'detach_interface' instance {server}" in resp.json["conflictingRequest"]["message"]
        assert _written(engine, server)[:2] == ([], [])


def test_detach_is_asked_of_the_controller(world):
    client, engine, _neutron = world
    server = _server(engine)
    port_id = str(uuid.uuid4())  # not even the server's: 202, the controller's event says so (as Nova's compute)
    resp = client.delete(f"/v2.1/servers/{server}/os-interface/{port_id}", headers=user(PROJECT, name="demo"))
    assert (resp.status_code, resp.content) == (202, b"")
    outbox, _requests, actions = _written(engine, server)
    assert outbox == [("detach-interface", port_id)]
    assert actions == [("detach_interface", [])]
    resp = client.delete(f"/v2.1/servers/{server}/os-interface/{port_id}", headers=user("another", name="x"))
    assert resp.status_code == 404


def test_without_neutron_nothing_to_attach(client, app, conf):
    engine = db_api.get_engine(conf)
    server = _server(engine, project="demo-project")
    port_id, net_id = str(uuid.uuid4()), str(uuid.uuid4())
    for body, status, message in (
            ({"port_id": port_id}, 404, f"Port id {port_id} could not be found."),
            ({"net_id": net_id}, 404, f"Network {net_id} could not be found."),
            ({}, 400, "No specific network was requested and none are available for project 'demo-project'.")):
        resp = client.post(f"/v2.1/servers/{server}/os-interface", json_body={"interfaceAttachment": body},
                           headers=user())
        assert (resp.status_code, next(iter(resp.json.values()))["message"]) == (status, message)


def test_schema_and_detach_lock_answers_as_the_oracle(world):
    """The servers oracle's words (Nova 34.0.0): an empty fixed_ips, a net_id that is no uuid, and a
    locked server's detach."""
    client, engine, _neutron = world
    server = _server(engine)
    resp = _attach(client, server, {"interfaceAttachment": {"net_id": str(uuid.uuid4()), "fixed_ips": []}})
    assert (resp.status_code, resp.json["badRequest"]["message"]) == (
        400, "Invalid input for field/attribute fixed_ips. Value: []. [] should be non-empty")
    resp = _attach(client, server, {"interfaceAttachment": {"net_id": "abc"}})
    assert (resp.status_code, resp.json["badRequest"]["message"]) == (
        400, "Invalid input for field/attribute net_id. Value: abc. 'abc' is not a 'uuid'")
    locked = _server(engine, locked=True)
    resp = client.delete(f"/v2.1/servers/{locked}/os-interface/{uuid.uuid4()}", headers=user(PROJECT, name="demo"))
    assert (resp.status_code, resp.json["conflictingRequest"]["message"]) == (409, f"Instance {locked} is locked")
    assert _written(engine, locked) == ([], [], [])


def test_an_attach_that_cannot_be_recorded_gives_the_port_back(world, monkeypatch):
    from openkeel_compute.api.handlers import server_interfaces

    client, engine, neutron = world
    server = _server(engine)
    net = neutron.network(project_id=PROJECT)
    theirs = neutron.port(net, project_id=PROJECT)

    def broken(*_args, **_kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(server_interfaces.network_requests, "add", broken)
    before = set(neutron.ports)
    assert _attach(client, server, {"interfaceAttachment": {"net_id": net["id"]}}).status_code == 500
    assert set(neutron.ports) == before  # the port made for it deleted
    assert _attach(client, server, {"interfaceAttachment": {"port_id": theirs["id"]}}).status_code == 500
    assert neutron.ports[theirs["id"]]["device_id"] == ""  # the user's port free again
    assert _written(engine, server)[:2] == ([], [])


def test_an_unshared_external_network_is_for_admins(world):
    client, engine, neutron = world
    server = _server(engine)
    external = neutron.network(project_id=PROJECT, **{"router:external": True})
    resp = _attach(client, server, {"interfaceAttachment": {"net_id": external["id"]}})
    assert (resp.status_code, resp.json["forbidden"]["message"]) == (
        403, f"It is not allowed to create an interface on external network {external['id']}")
    assert _written(engine, server)[2][-1] == ("attach_interface", [("compute_attach_interface", "Error")])
    assert _attach(client, server, {"interfaceAttachment": {"net_id": external["id"]}},
                   headers=admin("2.1")).status_code == 200
