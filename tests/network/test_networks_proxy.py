"""/os-networks and /os-tenant-networks as Nova 34.0.0 answers with Neutron (up to 2.35, 404 after),
and the pod network without [neutron]."""

from __future__ import annotations

import pytest

from openkeel_compute.compute import networks as pod
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf, user

NOVA_FIELDS = ("id", "cidr", "netmask", "gateway", "broadcast", "dns1", "dns2", "cidr_v6", "gateway_v6", "label",
               "netmask_v6")


@pytest.fixture
def world(tmp_path, neutron):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    policies.reset()
    conf = make_conf(tmp_path, neutron={"auth_type": "admin_token", "endpoint": neutron.url,
                                        "token": "neutron-admin", "endpoint_override": neutron.url})
    migration.sync(db_api.get_engine(conf))
    yield Client(deploy(conf)), neutron
    db_api.dispose_all()
    policies.reset()


def test_networks_from_neutron(world):
    client, neutron = world
    net = neutron.network(name="private")
    headers = user("demo", version="2.35")
    body = client.get("/v2.1/os-networks", headers=headers).json
    assert body == {"networks": [{**dict.fromkeys(NOVA_FIELDS), "id": net["id"], "label": "private"}]}
    shown = client.get(f"/v2.1/os-networks/{net['id']}", headers=headers).json["network"]
    assert (shown["id"], shown["label"], shown["cidr"]) == (net["id"], "private", None)
    assert len(client.get(f"/v2.1/os-networks/{net['id']}", headers=admin("2.35")).json["network"]) == 32
    assert client.get("/v2.1/os-tenant-networks", headers=headers).json == {
        "networks": [{"id": net["id"], "cidr": "None", "label": "private"}]}
    assert client.get(f"/v2.1/os-tenant-networks/{net['id']}", headers=headers).json == {
        "network": {"id": net["id"], "cidr": "None", "label": "private"}}
    for path in ("os-networks", "os-tenant-networks"):
        resp = client.get(f"/v2.1/{path}/{'0' * 8}-0000-4000-8000-{'0' * 12}", headers=headers)
        assert (resp.status_code, resp.json) == (404, {"itemNotFound": {"code": 404, "message": "Network not found"}})
        assert client.get(f"/v2.1/{path}", headers=user("demo", version="2.36")).status_code == 404
    assert neutron.requests[-1]["token"] == "demo:demo"


def test_pod_network_without_neutron(client):
    name = pod.POD_NETWORK
    body = client.get("/v2.1/os-tenant-networks", headers=user()).json
    assert body == {"networks": [{"id": pod.network_id(name), "cidr": "None", "label": name}]}
    assert client.get(f"/v2.1/os-networks/{pod.network_id(name)}", headers=user()).json["network"]["label"] == name
