"""Nova 34.0.0's network proxies that write, through Neutron (the in-memory Neutron over HTTP):
os-security-groups create/update/delete and os-security-group-rules (up to 2.35), os-floating-ips
allocate/release (up to 2.35), the addFloatingIp/removeFloatingIp and addFixedIp/removeFixedIp actions
(up to 2.43) and addSecurityGroup/removeSecurityGroup on the server's ports; and what they answer
without [neutron]."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import networks as pod
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.conftest import admin, make_conf, user

V = "2.35"


@pytest.fixture
def world(tmp_path, neutron):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    policies.reset()
    conf = make_conf(tmp_path, neutron={"auth_type": "admin_token", "endpoint": neutron.url,
                                        "token": "neutron-admin", "endpoint_override": neutron.url,
                                        "default_floating_pool": "public"})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    yield Client(deploy(conf)), engine, neutron
    db_api.dispose_all()
    policies.reset()


def _server(engine, project="demo", addresses=None, locked=False) -> str:
    ident = str(uuid.uuid4())
    info = {"private": [{"version": 4, "addr": a, "OS-EXT-IPS:type": "fixed"} for a in addresses]} \
        if addresses else None
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.INSTANCES), {
            "uuid": ident, "project_id": project, "user_id": "demo", "display_name": "s", "hostname": "s",
            "host": "node-1", "node": "node-1", "vm_state": "active", "power_state": 1, "memory_mb": 64, "vcpus": 1,
            "root_gb": 1, "ephemeral_gb": 0, "instance_type_id": 1, "created_at": models.utcnow(),
            "launch_index": 0, "deleted": 0, "availability_zone": "nova", "locked": locked,
            "network_info": json.dumps(info) if info else None})
    return ident


def _h(version=V, project="demo"):
    return user(project, name="demo", version=version)


def _msg(resp):
    return resp.status_code, next(iter(resp.json.values()))["message"]


def _writes(neutron):
    return [(r["method"], r["path"]) for r in neutron.requests if r["method"] != "GET"]


# -- os-security-groups ------------------------------------------------------------------------------------

def test_security_group_create_update_delete(world):
    client, _engine, neutron = world
    resp = client.post("/v2.1/os-security-groups", json_body={"security_group": {"name": "web", "description": "d"}},
                       headers=_h())
    assert resp.status_code == 200
    made = resp.json["security_group"]
    assert made == {"id": made["id"], "name": "web", "description": "d", "tenant_id": "demo", "rules": []}
    assert neutron.security_groups[made["id"]]["tenant_id"] == "demo"  # made with the caller's token
    assert neutron.requests[-1]["body"] == {"security_group": {"name": "web", "description": "d"}}
    resp = client.put(f"/v2.1/os-security-groups/{made['id']}",
                      json_body={"security_group": {"name": "web2", "description": ""}}, headers=_h())
    assert resp.json["security_group"] == {**made, "name": "web2", "description": ""}
    assert client.delete(f"/v2.1/os-security-groups/{made['id']}", headers=_h()).status_code == 202
    assert made["id"] not in neutron.security_groups
    resp = client.delete(f"/v2.1/os-security-groups/{made['id']}", headers=_h())
    assert _msg(resp) == (404, (f"Security group {made['id']} does not exist\n"
                               f"Neutron server returns request_ids: ['req-{neutron.request_count:08d}-0000-4000-"
                               "8000-000000000000']"))
    for method in (client.put, client.delete):
        kwargs = {"json_body": {"security_group": {"name": "x", "description": "y"}}} if method == client.put else {}
        assert _msg(method("/v2.1/os-security-groups/abc", headers=_h(), **kwargs)) == (
            400, "Security group id should be uuid")
    before = len(neutron.requests)
    resp = client.post("/v2.1/os-security-groups", json_body={"security_group": {"name": "x"}}, headers=_h())
    assert _msg(resp) == (400, ("Invalid input for field/attribute security_group. Value: {'name': 'x'}. "
                               "'description' is a required property"))
    assert len(neutron.requests) == before
    resp = client.post("/v2.1/os-security-groups", json_body={"security_group": {"name": "x", "description": "y"}},
                       headers=_h("2.36"))
    assert resp.status_code == 404


def test_security_group_refusals_passed_on(world):
    client, _engine, neutron = world
    default = neutron.security_group("default")
    resp = client.delete(f"/v2.1/os-security-groups/{default['id']}", headers=_h())
    assert resp.status_code == 400
    assert resp.json["badRequest"]["message"].startswith("Insufficient rights for removing default security group.\n"
                                                         "Neutron server returns request_ids: ['req-")
    used = neutron.security_group("used")
    neutron.port(neutron.network(), security_groups=[used["id"]])
    resp = client.delete(f"/v2.1/os-security-groups/{used['id']}", headers=_h())
    assert resp.status_code == 400 and resp.json["badRequest"]["message"].startswith(
        f"Security Group {used['id']} in use.")
    neutron.security_group_quota = 2
    resp = client.post("/v2.1/os-security-groups", json_body={"security_group": {"name": "x", "description": ""}},
                       headers=_h())
    assert resp.status_code == 403
    assert resp.json["forbidden"]["message"].startswith("Quota exceeded for resources: ['security_group'].")
    neutron.fail_with = 500
    resp = client.post("/v2.1/os-security-groups", json_body={"security_group": {"name": "x", "description": ""}},
                       headers=_h())
    assert resp.status_code == 503


def test_security_groups_without_neutron(client):
    default = pod.group_id("demo-project", "default")
    body = {"security_group": {"name": "x", "description": "y"}}
    assert _msg(client.post("/v2.1/os-security-groups", json_body=body, headers=user())) == (
        403, "Quota exceeded, too many security groups.")
    assert _msg(client.put(f"/v2.1/os-security-groups/{default}", json_body=body, headers=user())) == (
        400, "Updating default security group not allowed.")
    assert _msg(client.delete(f"/v2.1/os-security-groups/{default}", headers=user())) == (
        400, "Insufficient rights for removing default security group.")
    other = str(uuid.uuid4())
    assert _msg(client.delete(f"/v2.1/os-security-groups/{other}", headers=user())) == (
        404, f"Security group {other} does not exist")
    rule = {"security_group_rule": {"parent_group_id": default, "ip_protocol": "tcp", "from_port": 22,
                                    "to_port": 22}}
    assert _msg(client.post("/v2.1/os-security-group-rules", json_body=rule, headers=user())) == (
        403, "Quota exceeded, too many security groups.")
    rule["security_group_rule"]["to_port"] = 21
    assert _msg(client.post("/v2.1/os-security-group-rules", json_body=rule, headers=user())) == (
        400, "Invalid port range 22:21. Former value cannot be greater than the later")
    assert _msg(client.delete(f"/v2.1/os-security-group-rules/{other}", headers=user())) == (
        404, f"Security group rule {other} does not exist")


# -- os-security-group-rules -------------------------------------------------------------------------------

def _rule(client, version=V, **fields):
    return client.post("/v2.1/os-security-group-rules", json_body={"security_group_rule": fields}, headers=_h(version))


def test_rules_created_as_nova_sends_them(world):
    client, _engine, neutron = world
    web, db = neutron.security_group("web"), neutron.security_group("db")
    resp = _rule(client, parent_group_id=web["id"], ip_protocol="tcp", from_port=22, to_port="22",
                 cidr="10.0.0.0/8")
    assert resp.status_code == 200
    made = resp.json["security_group_rule"]
    assert made == {"id": made["id"], "parent_group_id": web["id"], "ip_protocol": "tcp", "from_port": 22,
                    "to_port": 22, "group": {}, "ip_range": {"cidr": "10.0.0.0/8"}}
    assert neutron.requests[-1]["body"] == {"security_group_rules": [{
        "direction": "ingress", "protocol": "tcp", "ethertype": "IPv4", "remote_ip_prefix": "10.0.0.0/8",
        "security_group_id": web["id"], "remote_group_id": None, "port_range_min": 22, "port_range_max": 22}]}
    resp = _rule(client, parent_group_id=web["id"], group_id=db["id"], ip_protocol="tcp")
    assert resp.json["security_group_rule"]["group"] == {"name": "db", "tenant_id": "demo"}
    assert (resp.json["security_group_rule"]["from_port"], resp.json["security_group_rule"]["to_port"]) == (1, 65535)
    resp = _rule(client, parent_group_id=web["id"], ip_protocol="icmp", from_port=-1, to_port=-1,
                 cidr="2001:db8::/32")
    assert resp.status_code == 200
    sent = neutron.requests[-1]["body"]["security_group_rules"][0]
    assert (sent["ethertype"], "port_range_min" in sent, "port_range_max" in sent) == ("IPv6", False, False)
    shown = client.get(f"/v2.1/os-security-groups/{web['id']}", headers=_h()).json["security_group"]
    assert len(shown["rules"]) == 3
    rule_id = made["id"]
    assert client.delete(f"/v2.1/os-security-group-rules/{rule_id}", headers=_h()).status_code == 202
    assert rule_id not in neutron.rules()
    resp = client.delete(f"/v2.1/os-security-group-rules/{rule_id}", headers=_h())
    assert resp.status_code == 404
    assert resp.json["itemNotFound"]["message"].startswith(f"Security group rule {rule_id} does not exist")
    assert _msg(client.delete("/v2.1/os-security-group-rules/x", headers=_h())) == (
        400, "Security group id should be uuid")
    assert _rule(client, "2.36", parent_group_id=web["id"]).status_code == 404


@pytest.mark.parametrize("fields, message", [
    ({}, "Not enough parameters to build a valid rule."),
    ({"ip_protocol": "tcp", "from_port": 22}, "Not enough parameters to build a valid rule."),
    ({"ip_protocol": "foo", "from_port": 1, "to_port": 2}, "Invalid IP protocol foo."),
    ({"ip_protocol": "tcp", "from_port": "a", "to_port": 2}, "Invalid input received: To and From ports must be integers"),
    ({"ip_protocol": "icmp", "from_port": "a", "to_port": 2},
     "Invalid input received: Type and Code must be integers for ICMP protocol type"),
    ({"ip_protocol": "udp", "from_port": 0, "to_port": 2},
     "Invalid port range 0:2. Valid UDP ports should be between 1-65535"),
    ({"ip_protocol": "icmp", "from_port": 256, "to_port": 2},
     "Invalid port range 256:2. For ICMP, the type:code must be valid"),
    ({"ip_protocol": "tcp", "from_port": 1, "to_port": 2, "cidr": "10.0.0.300/8"}, "10.0.0.300/8 is not a valid IP network."),
    ({"ip_protocol": "tcp", "from_port": 1, "to_port": 2, "cidr": "10.0.0.1"}, "10.0.0.1 is not a valid IP network."),
    ({"ip_protocol": "tcp", "from_port": 1, "to_port": 2, "cidr": "10.0.0.0/0"}, "Bad prefix for network in cidr 10.0.0.0/0"),
])
def test_rule_checks_before_neutron(world, fields, message):
    client, _engine, neutron = world
    web = neutron.security_group("web")
    writes = _writes(neutron)
    assert _msg(_rule(client, parent_group_id=web["id"], **fields)) == (400, message)
    assert _writes(neutron) == writes


def test_rule_duplicate_and_unknown_groups(world):
    client, _engine, neutron = world
    web = neutron.security_group("web")
    rule = {"parent_group_id": web["id"], "ip_protocol": "tcp", "from_port": 22, "to_port": 22}
    assert _rule(client, **rule).status_code == 200
    assert _msg(_rule(client, **rule)) == (400, f"This rule already exists in group {web['id']}")
    unknown = str(uuid.uuid4())
    resp = _rule(client, **{**rule, "parent_group_id": unknown})
    assert resp.status_code == 404
    resp = _rule(client, **{**rule, "group_id": unknown})
    assert resp.status_code == 404 and unknown in resp.json["itemNotFound"]["message"]
    assert _msg(_rule(client, parent_group_id="x")) == (
        400, "Invalid input for field/attribute parent_group_id. Value: x. 'x' is not a 'uuid'")


# -- os-floating-ips ---------------------------------------------------------------------------------------

def test_allocate_and_release(world):
    client, engine, neutron = world
    public = neutron.network(name="public", **{"router:external": True})
    other = neutron.network(name="other", **{"router:external": True})
    resp = client.post("/v2.1/os-floating-ips", headers=_h())  # no body: the default pool
    assert resp.status_code == 200
    fip = resp.json["floating_ip"]
    assert fip == {"id": fip["id"], "ip": neutron.floating_ips[fip["id"]]["floating_ip_address"], "pool": "public",
                   "fixed_ip": None, "instance_id": None}
    assert neutron.floating_ips[fip["id"]]["tenant_id"] == "demo"
    resp = client.post("/v2.1/os-floating-ips", json_body={"pool": other["id"]}, headers=_h())
    assert resp.json["floating_ip"]["pool"] == "other"
    assert _msg(client.post("/v2.1/os-floating-ips", json_body={"pool": "nope"}, headers=_h())) == (
        404, "Floating IP pool not found.")
    neutron.network(name="private")
    assert _msg(client.post("/v2.1/os-floating-ips", json_body={"pool": "private"}, headers=_h())) == (
        404, "Floating IP pool not found.")  # not an external network
    neutron.floating_ip_quota = 2
    assert _msg(client.post("/v2.1/os-floating-ips", json_body={"pool": "public"}, headers=_h())) == (
        403, "IP allocation over quota in pool public.")
    assert _msg(client.post("/v2.1/os-floating-ips", headers=_h())) == (403, "IP allocation over quota.")
    assert _msg(client.post("/v2.1/os-floating-ips", json_body={"pool": 1}, headers=_h())) == (
        400, "Invalid input for field/attribute pool. Value: 1. 1 is not of type 'string', 'null'")
    assert client.delete(f"/v2.1/os-floating-ips/{fip['id']}", headers=_h()).status_code == 202
    assert fip["id"] not in neutron.floating_ips
    assert _msg(client.delete(f"/v2.1/os-floating-ips/{fip['id']}", headers=_h())) == (
        404, f"Floating IP not found for ID {fip['id']}")
    # associated to a server the caller cannot see: Nova loads the server first
    hidden = _server(engine, project="other")
    port = neutron.port(neutron.network(), device_id=hidden)
    theirs = neutron.floating_ip(public, port=port)
    assert _msg(client.delete(f"/v2.1/os-floating-ips/{theirs['id']}", headers=_h())) == (
        404, f"Instance {hidden} could not be found.")
    assert client.delete(f"/v2.1/os-floating-ips/{theirs['id']}", headers=admin(V)).status_code == 202
    assert client.post("/v2.1/os-floating-ips", headers=_h("2.36")).status_code == 404
    assert public["id"]


def test_floating_ips_without_neutron(client):
    assert _msg(client.post("/v2.1/os-floating-ips", headers=user())) == (404, "Floating IP pool not found.")
    assert _msg(client.delete("/v2.1/os-floating-ips/x", headers=user())) == (404, "Floating IP not found for ID x")


# -- addFloatingIp / removeFloatingIp -----------------------------------------------------------------------

def _act(client, server, body, version="2.43", project="demo"):
    return client.post(f"/v2.1/servers/{server}/action", json_body=body, headers=_h(version, project))


def test_associate_and_disassociate(world):
    client, engine, neutron = world
    public = neutron.network(name="public", **{"router:external": True})
    net = neutron.network(name="private")
    server = _server(engine, addresses=["10.0.0.10"])
    port = neutron.port(net, device_id=server, device_owner="compute:nova",
                        fixed_ips=[{"subnet_id": net["subnets"][0], "ip_address": "10.0.0.10"}])
    fip = neutron.floating_ip(public)
    address = fip["floating_ip_address"]
    assert _act(client, server, {"addFloatingIp": {"address": address}}).status_code == 202
    assert (fip["port_id"], fip["fixed_ip_address"]) == (port["id"], "10.0.0.10")
    assert neutron.requests[-1]["token"] == "demo:demo"
    shown = client.get(f"/v2.1/os-floating-ips/{fip['id']}", headers=_h()).json["floating_ip"]
    assert (shown["instance_id"], shown["fixed_ip"]) == (server, "10.0.0.10")
    other = _server(engine, addresses=["10.0.0.11"])
    neutron.port(net, device_id=other, device_owner="compute:nova",
                 fixed_ips=[{"subnet_id": net["subnets"][0], "ip_address": "10.0.0.11"}])
    resp = _act(client, other, {"addFloatingIp": {"address": address}})
    assert resp.status_code == 400 and resp.json["badRequest"]["message"].startswith(
        f"Cannot associate floating IP {address}")
    assert _msg(_act(client, other, {"removeFloatingIp": {"address": address}})) == (
        409, f"Floating IP {address} is not associated with instance {other}.")
    assert _act(client, server, {"removeFloatingIp": {"address": address}}).status_code == 202
    assert fip["port_id"] is None
    # a free floating IP has no server to take the policy target from: Nova checks the rule against an
    # empty target, which only an admin passes
    resp = _act(client, server, {"removeFloatingIp": {"address": address}})
    assert _msg(resp) == (403, "Policy doesn't allow os_compute_api:os-floating-ips:remove to be performed.")
    resp = client.post(f"/v2.1/servers/{server}/action", json_body={"removeFloatingIp": {"address": address}},
                       headers=admin("2.43"))
    assert _msg(resp) == (409, f"Floating IP {address} is not associated with instance {server}.")
    assert _msg(_act(client, server, {"removeFloatingIp": {"address": "172.24.4.99"}})) == (
        404, "Floating IP not found for address 172.24.4.99.")
    for action in ("addFloatingIp", "removeFloatingIp"):
        assert _act(client, server, {action: {"address": address}}, "2.44").status_code == 404


def test_associate_refusals(world):
    client, engine, neutron = world
    public = neutron.network(name="public", **{"router:external": True})
    address = neutron.floating_ip(public)["floating_ip_address"]
    not_ready = _server(engine)
    assert _msg(_act(client, not_ready, {"addFloatingIp": {"address": address}})) == (
        400, "Instance network is not ready yet")
    server = _server(engine, addresses=["10.0.0.10"])
    assert _msg(_act(client, server, {"addFloatingIp": {"address": address, "fixed_address": "10.0.0.9"}})) == (
        400, "Specified fixed address not assigned to instance")
    assert _msg(_act(client, server, {"addFloatingIp": {"address": address}})) == (
        400, (f"Unable to associate floating IP {address} to fixed IP 10.0.0.10 for instance {server}. "
             "Error: Fixed IP not found for address 10.0.0.10."))  # no port of the server holds it
    net = neutron.network()
    neutron.port(net, device_id=server, device_owner="compute:nova",
                 fixed_ips=[{"subnet_id": net["subnets"][0], "ip_address": "10.0.0.10"}])
    assert _msg(_act(client, server, {"addFloatingIp": {"address": "172.24.4.99"}})) == (
        404, "floating IP not found")
    v6 = _server(engine, addresses=["2001:db8::5"])
    assert _msg(_act(client, v6, {"addFloatingIp": {"address": address}})) == (
        400, (f"Unable to associate floating IP {address} to any fixed IPs for instance {v6}. Instance has no "
             "fixed IPv4 addresses to associate."))
    assert _msg(_act(client, server, {"addFloatingIp": {"address": "bad"}})) == (
        400, ("Invalid input for field/attribute address. Value: bad. 'bad' is not valid under any of the given "
             "schemas"))
    unknown = str(uuid.uuid4())
    assert _msg(_act(client, unknown, {"addFloatingIp": {"address": address}})) == (
        404, f"Instance {unknown} could not be found.")


def test_floating_ip_actions_without_neutron(client, conf):
    engine = db_api.get_engine(conf)
    server = _server(engine, project="demo-project", addresses=["10.244.0.5"])
    headers = user(version="2.43")
    resp = client.post(f"/v2.1/servers/{server}/action", json_body={"addFloatingIp": {"address": "1.2.3.4"}},
                       headers=headers)
    assert _msg(resp) == (404, "floating IP not found")
    resp = client.post(f"/v2.1/servers/{server}/action", json_body={"removeFloatingIp": {"address": "1.2.3.4"}},
                       headers=headers)
    assert _msg(resp) == (404, "Floating IP not found for address 1.2.3.4.")


# -- addFixedIp / removeFixedIp ------------------------------------------------------------------------------

def test_add_and_remove_fixed_ip(world):
    client, engine, neutron = world
    net = neutron.network()
    server = _server(engine, addresses=["10.0.0.10"])
    port = neutron.port(net, device_id=server, device_owner="compute:nova",
                        fixed_ips=[{"subnet_id": net["subnets"][0], "ip_address": "10.0.0.10"}])
    assert _act(client, server, {"addFixedIp": {"networkId": net["id"]}}).status_code == 202
    assert len(port["fixed_ips"]) == 2 and port["fixed_ips"][1]["subnet_id"] == net["subnets"][0]
    added = port["fixed_ips"][1]["ip_address"]
    assert _act(client, server, {"removeFixedIp": {"address": added}}).status_code == 202
    assert [ip["ip_address"] for ip in port["fixed_ips"]] == ["10.0.0.10"]
    writes = _writes(neutron)
    # what Nova's compute cannot do is not the client's answer: 202, nothing changes
    assert _act(client, server, {"addFixedIp": {"networkId": str(uuid.uuid4())}}).status_code == 202
    assert _act(client, server, {"removeFixedIp": {"address": "10.9.9.9"}}).status_code == 202
    assert _act(client, server, {"addFixedIp": {"networkId": 1}}).status_code == 202
    assert _writes(neutron) == writes
    assert _msg(_act(client, server, {"addFixedIp": {"networkId": ""}})) == (
        400, "Invalid input for field/attribute networkId. Value: . '' should be non-empty")
    assert _msg(_act(client, server, {"addFixedIp": {}})) == (
        400, "Invalid input for field/attribute addFixedIp. Value: {}. 'networkId' is a required property")
    for body in ({"addFixedIp": {"networkId": net["id"]}}, {"removeFixedIp": {"address": "10.0.0.10"}}):
        assert _act(client, server, body, "2.44").status_code == 404
    locked = _server(engine, addresses=["10.0.0.12"], locked=True)
    assert _msg(_act(client, locked, {"addFixedIp": {"networkId": net["id"]}})) == (
        409, f"Instance {locked} is locked")
    assert _act(client, locked, {"removeFixedIp": {"address": "10.0.0.12"}}, project="demo").status_code == 409


# -- addSecurityGroup / removeSecurityGroup on the server's ports -------------------------------------------

def test_server_security_groups_on_ports(world):
    client, engine, neutron = world
    net = neutron.network()
    default, web = neutron.security_group("default"), neutron.security_group("web")
    server = _server(engine, addresses=["10.0.0.10"])
    ports = [neutron.port(net, device_id=server, security_groups=[default["id"]]) for _ in range(2)]
    assert _act(client, server, {"addSecurityGroup": {"name": "web"}}, "2.1").status_code == 202
    assert [p["security_groups"] for p in ports] == [[default["id"], web["id"]]] * 2
    listed = client.get(f"/v2.1/servers/{server}/os-security-groups", headers=_h("2.1")).json["security_groups"]
    assert [g["name"] for g in listed] == ["default", "default", "web", "web"]  # one entry per port, as Nova
    assert _act(client, server, {"removeSecurityGroup": {"name": web["id"]}}, "2.1").status_code == 202
    assert [p["security_groups"] for p in ports] == [[default["id"]]] * 2
    assert _msg(_act(client, server, {"removeSecurityGroup": {"name": "web"}}, "2.1")) == (
        404, f"Security group web not associated with the instance {server}")
    assert _msg(_act(client, server, {"addSecurityGroup": {"name": "nope"}}, "2.1")) == (
        404, "Security group nope is not found for project demo")
    neutron.security_group("web")
    assert _msg(_act(client, server, {"addSecurityGroup": {"name": "web"}}, "2.1")) == (
        409, "Multiple security_group matches found for name 'web', use an ID to be more specific.")
    assert _msg(_act(client, server, {"addSecurityGroup": {"name": " "}}, "2.1")) == (
        400, "Security group name cannot be empty")
    portless = _server(engine)
    assert _msg(_act(client, portless, {"addSecurityGroup": {"name": "default"}}, "2.1")) == (
        404, f"instance_id {portless} could not be found as device id on any ports")
    closed = _server(engine)
    neutron.port(net, device_id=closed, port_security_enabled=False)
    assert _msg(_act(client, closed, {"addSecurityGroup": {"name": "default"}}, "2.1")) == (
        400, "Network requires port_security_enabled and subnet associated in order to apply security groups.")
    assert all(r["token"] == "demo:demo" for r in neutron.requests)
