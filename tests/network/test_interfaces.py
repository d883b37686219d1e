"""GET /servers/{id}/os-interface[/{port_id}] as Nova 34.0.0 answers: the server's Neutron ports (the
caller's token), tags from 2.70, another server's port not found; without [neutron], no ports."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import network_requests
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.conftest import make_conf, user


def _server(engine, project="demo") -> str:
    ident = str(uuid.uuid4())
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.INSTANCES), {
            "uuid": ident, "project_id": project, "user_id": "demo", "display_name": "s", "hostname": "s",
            "host": "node-1", "node": "node-1", "vm_state": "active", "power_state": 1, "memory_mb": 64, "vcpus": 1,
            "root_gb": 1, "ephemeral_gb": 0, "instance_type_id": 1, "created_at": models.utcnow(),
            "launch_index": 0, "deleted": 0})
    return ident


@pytest.fixture
def world(tmp_path, neutron):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    policies.reset()
    conf = make_conf(tmp_path, neutron={"auth_type": "admin_token", "endpoint": neutron.url,
                                        "token": "neutron-admin", "endpoint_override": neutron.url})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    yield Client(deploy(conf)), engine, neutron
    db_api.dispose_all()
    policies.reset()


def _get(client, path, version="2.104", project="demo"):
    return client.get(f"/v2.1/servers/{path}", headers=user(project, name="demo", version=version))


def test_list_and_show_with_tags(world):
    client, engine, neutron = world
    server = _server(engine)
    net = neutron.network()
    mine = neutron.port(net, device_id=server, status="ACTIVE")
    neutron.port(net, device_id="another-server")
    with db_api.transaction(engine) as conn:
        network_requests.record(conn, server, [{"position": 0, "network_id": net["id"], "port_id": mine["id"],
                                                "tag": "eth-a"}])
    view = {"net_id": net["id"], "port_id": mine["id"], "mac_addr": mine["mac_address"], "port_state": "ACTIVE",
            "fixed_ips": mine["fixed_ips"]}
    assert _get(client, f"{server}/os-interface", "2.69").json == {"interfaceAttachments": [view]}
    assert _get(client, f"{server}/os-interface").json == {"interfaceAttachments": [{**view, "tag": "eth-a"}]}
    assert _get(client, f"{server}/os-interface/{mine['id']}", "2.1").json == {"interfaceAttachment": view}
    assert _get(client, f"{server}/os-interface/{mine['id']}").json == {"interfaceAttachment": {**view, "tag": "eth-a"}}
    assert neutron.requests[-1]["token"] == "demo:demo"


def test_not_found(world):
    client, engine, neutron = world
    server = _server(engine)
    other = neutron.port(neutron.network(), device_id="another-server")
    resp = _get(client, f"{server}/os-interface/{other['id']}")
    assert (resp.status_code, resp.json["itemNotFound"]["message"]) == (
        404, f"Instance {server} does not have a port with id {other['id']}")
    unknown = str(uuid.uuid4())
    resp = _get(client, f"{server}/os-interface/{unknown}")
    assert (resp.status_code, resp.json["itemNotFound"]["message"]) == (404, f"Port id {unknown} could not be found.")
    resp = _get(client, f"{unknown}/os-interface")
    assert (resp.status_code, resp.json["itemNotFound"]["message"]) == (404, f"Instance {unknown} could not be found.")
    assert _get(client, f"{server}/os-interface?foo=1").status_code == 400  # 2.102: no unknown query
    assert _get(client, f"{server}/os-interface?foo=1", "2.101").status_code == 200


def test_without_neutron_no_ports(client, app, conf):
    engine = db_api.get_engine(conf)
    server = _server(engine, project="demo-project")
    assert client.get(f"/v2.1/servers/{server}/os-interface", headers=user()).json == {"interfaceAttachments": []}
    resp = client.get(f"/v2.1/servers/{server}/os-interface/{server}", headers=user())
    assert resp.status_code == 404
