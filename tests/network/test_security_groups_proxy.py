"""GET /os-security-groups[/{id}] as Nova 34.0.0's proxy answers with Neutron (up to 2.35): ingress rules
in nova-network's shape, remote groups by name, paging, all_tenants for admins; the pod network's
``default`` group without [neutron]."""

from __future__ import annotations

import uuid

from openkeel_compute.compute import networks as pod
from tests.conftest import admin, user
from tests.network.test_networks_proxy import world  # noqa: F401 - the fixture

V = "2.35"


def _rule(group, **fields):
    rule = {"id": str(uuid.uuid4()), "security_group_id": group["id"], "direction": "ingress", "protocol": None,
            "port_range_min": None, "port_range_max": None, "remote_group_id": None, "remote_ip_prefix": None,
            **fields}
    group["security_group_rules"].append(rule)
    return rule


def test_groups_and_rules(world):  # noqa: F811
    client, neutron = world
    web = neutron.security_group("web")
    other = neutron.security_group("db", project_id="demo")
    ssh = _rule(web, protocol="tcp", port_range_min=22, port_range_max=22, remote_ip_prefix="10.0.0.0/8")
    tcp = _rule(web, protocol="tcp")
    icmp = _rule(web, protocol="icmp")
    from_db = _rule(web, remote_group_id=other["id"])
    _rule(web, direction="egress")
    _rule(web, remote_group_id=str(uuid.uuid4()))  # a group that is gone: left out
    neutron.security_group("elsewhere", project_id="other")
    body = client.get("/v2.1/os-security-groups", headers=user("demo", version=V)).json
    assert [g["name"] for g in body["security_groups"]] == ["db", "web"]  # Nova sorts by project and name
    group = body["security_groups"][1]
    assert {k: group[k] for k in ("id", "description", "tenant_id")} == {
        "id": web["id"], "description": "web group", "tenant_id": "demo"}
    assert group["rules"] == [
        {"id": ssh["id"], "parent_group_id": web["id"], "ip_protocol": "tcp", "from_port": 22, "to_port": 22,
         "group": {}, "ip_range": {"cidr": "10.0.0.0/8"}},
        {"id": tcp["id"], "parent_group_id": web["id"], "ip_protocol": "tcp", "from_port": 1, "to_port": 65535,
         "group": {}, "ip_range": {"cidr": "0.0.0.0/0"}},
        {"id": icmp["id"], "parent_group_id": web["id"], "ip_protocol": "icmp", "from_port": -1, "to_port": -1,
         "group": {}, "ip_range": {"cidr": "0.0.0.0/0"}},
        {"id": from_db["id"], "parent_group_id": web["id"], "ip_protocol": None, "from_port": None, "to_port": None,
         "group": {"name": "db", "tenant_id": "demo"}, "ip_range": {}}]
    shown = client.get(f"/v2.1/os-security-groups/{web['id']}", headers=user("demo", version=V)).json
    assert shown == {"security_group": group}
    paged = client.get("/v2.1/os-security-groups?limit=1&offset=1", headers=user("demo", version=V)).json
    assert [g["name"] for g in paged["security_groups"]] == ["db"]  # paged in Neutron's order, then sorted
    everyone = client.get("/v2.1/os-security-groups?all_tenants=1", headers=admin(V)).json
    assert {g["name"] for g in everyone["security_groups"]} == {"web", "db", "elsewhere"}


def test_not_found_and_bad_id(world):  # noqa: F811
    client, _neutron = world
    unknown = str(uuid.uuid4())
    resp = client.get(f"/v2.1/os-security-groups/{unknown}", headers=user("demo", version=V))
    # Nova passes neutronclient's text on: Neutron's message, then the request id it answered with
    assert (resp.status_code, resp.json["itemNotFound"]["message"]) == (
        404, (f"Security group {unknown} does not exist\nNeutron server returns request_ids: "
             f"['req-{_neutron.request_count:08d}-0000-4000-8000-000000000000']"))
    resp = client.get("/v2.1/os-security-groups/not-a-uuid", headers=user("demo", version=V))
    assert (resp.status_code, resp.json["badRequest"]["message"]) == (400, "Security group id should be uuid")
    assert client.get("/v2.1/os-security-groups", headers=user("demo", version="2.36")).status_code == 404
    resp = client.get("/v2.1/os-security-groups?limit=x", headers=user("demo", version=V))
    assert resp.json == {"badRequest": {"code": 400, "message": (
        "Invalid input for query parameters limit. Value: x. 'x' does not match '^[0-9]*$'")}}


def test_default_group_without_neutron(client):
    body = client.get("/v2.1/os-security-groups", headers=user()).json
    default = {"id": pod.group_id("demo-project", "default"), "description": "Default security group",
               "name": "default", "tenant_id": "demo-project", "rules": []}
    assert body == {"security_groups": [default]}
    assert client.get(f"/v2.1/os-security-groups/{default['id']}", headers=user()).json == {"security_group": default}
