"""Nova's network checks and proxies against a real Neutron 29 (../shared's neutron-up.sh): the one
OPENKEEL_TEST_NEUTRON_DIR names (the recipe's OKC_SERVICES_DIR, with harness/keystone.env and
networks.env), else one started once for the session (tests/network/shared_neutron.py; skipped with the
reason when it cannot be). The caller is Keystone's demo user with a real token; the [neutron]
credential is the nova service user, as a deployment sets it."""

from __future__ import annotations

import pathlib
import types
import uuid

import pytest

from openkeel_compute.network import client as client_mod
from openkeel_compute.network import errors, validate
from tests.conftest import make_conf

# one xdist worker runs the whole module (scripts/test's --dist loadgroup): one real Neutron is started a run
pytestmark = pytest.mark.xdist_group("real-neutron")


def _env(path: pathlib.Path) -> dict:
    values = {}
    for line in path.read_text().splitlines():
        for word in line.removeprefix("export ").split():
            if "=" in word:
                key, value = word.split("=", 1)
                values[key] = value.strip("'\"")
    return values


@pytest.fixture(scope="module")
def real(tmp_path_factory, real_neutron_dir):
    base = pathlib.Path(real_neutron_dir)
    ks, nets = _env(base / "harness" / "keystone.env"), _env(base / "networks.env")
    conf = make_conf(tmp_path_factory.mktemp("real-neutron"), neutron={
        "auth_type": "password", "auth_url": ks["KEYSTONE_URL"], "username": ks["SERVICE_USERNAME"],
        "password": ks["SERVICE_PASSWORD"], "project_name": ks.get("SERVICE_PROJECT_NAME", "service"),
        "user_domain_name": "Default", "project_domain_name": "Default", "region_name": "RegionOne"})
    from keystoneauth1 import session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=ks["KEYSTONE_URL"], username=ks["DEMO_USERNAME"], password=ks["DEMO_PASSWORD"],
                       project_name=ks.get("DEMO_PROJECT_NAME", "demo"), user_domain_name="Default",
                       project_domain_name="Default")
    sess = session.Session(auth=auth)
    token, project = sess.get_token(), sess.get_project_id()
    context = types.SimpleNamespace(auth_token=token, project_id=project, is_admin=False,
                                    environ={"keystone.token_auth": auth})
    client = client_mod.NeutronClient(conf)
    return types.SimpleNamespace(conf=conf, caller=client.for_caller(context), admin=client.admin(),
                                 project=project, private=nets["PRIVATE_NETWORK_ID"], created=[], nets=nets)


def _make(real, kind: str, body: dict) -> dict:
    made = real.admin.request("POST", f"/{kind}s", body={kind: body}, ok=(201,))[kind]
    real.created.append((kind, made["id"]))
    return made


@pytest.fixture(autouse=True)
def _cleanup(real):
    yield
    for kind, ident in reversed(real.created):
        real.admin.request("DELETE", f"/{kind}s/{ident}", ok=(204, 404))
    real.created.clear()


def test_shared_network_and_auto(real):
    assert validate.validate_networks(real.caller, real.project, [{"uuid": real.private}], 3) == 3
    assert validate.validate_networks(real.caller, real.project, "auto", 1) == 1


def test_unknown_network_and_port(real):
    unknown = str(uuid.uuid4())
    with pytest.raises(errors.NetworkNotFound):
        validate.validate_networks(real.caller, real.project, [{"uuid": unknown}], 1)
    with pytest.raises(errors.PortNotFound):
        validate.validate_networks(real.caller, real.project, [{"port": unknown}], 1)


def test_ports_in_use_free_and_fixed_ip(real):
    free = _make(real, "port", {"network_id": real.private, "project_id": real.project})
    requested = [{"port": free["id"]}]
    assert validate.validate_networks(real.caller, real.project, requested, 1) == 1
    assert requested[0]["uuid"] == real.private
    used = _make(real, "port", {"network_id": real.private, "project_id": real.project, "device_id": "srv-1",
                                "device_owner": "compute:nova"})
    with pytest.raises(errors.PortInUse):
        validate.validate_networks(real.caller, real.project, [{"port": used["id"]}], 1)
    address = used["fixed_ips"][0]["ip_address"]
    with pytest.raises(errors.FixedIpAlreadyInUse) as caught:
        validate.validate_networks(real.caller, real.project, [{"uuid": real.private, "fixed_ip": address}], 1)
    assert caught.value.message == f"Fixed IP address {address} is already in use on instance srv-1."


def test_own_network_without_subnet_and_ambiguity(real):
    own = _make(real, "network", {"name": "okc-nosubnet", "project_id": real.project})
    with pytest.raises(errors.NetworkRequiresSubnet):
        validate.validate_networks(real.caller, real.project, [{"uuid": own["id"]}], 1)
    with pytest.raises(errors.NetworkAmbiguous):  # its own network beside the shared one
        validate.validate_networks(real.caller, real.project, "auto", 1)


def test_security_groups(real):
    assert validate.security_groups(real.caller, real.project, ["default"]) == ["default"]
    group = _make(real, "security_group", {"name": "okc-web", "project_id": real.project})
    assert validate.security_groups(real.caller, real.project, ["okc-web", group["id"]]) == [group["id"]] * 2
    with pytest.raises(errors.SecurityGroupNotFound) as caught:
        validate.security_groups(real.caller, real.project, ["okc-none"])
    assert caught.value.message == "Unable to find security_group with name or id 'okc-none'"


def test_port_quota(real):
    real.admin.request("PUT", f"/quotas/{real.project}", body={"quota": {"port": 1}})
    try:
        _make(real, "port", {"network_id": real.private, "project_id": real.project})
        with pytest.raises(errors.PortLimitExceeded):
            validate.max_for_quota(
                validate.validate_networks(real.caller, real.project, [{"uuid": real.private}], 1), 1, 1)
    finally:
        real.admin.request("DELETE", f"/quotas/{real.project}", ok=(204,))


def test_external_networks_are_the_floating_ip_pools(real):
    pools = real.caller.list_networks(**{"router:external": True})
    assert "public" in {p["name"] for p in pools}
    assert real.private not in {p["id"] for p in pools}
    assert real.caller.show_network(real.private)["id"] == real.private
    with pytest.raises(errors.NetworkNotFound):
        real.caller.show_network(str(uuid.uuid4()))


def test_security_group_in_novas_shape(real):
    from openkeel_compute.api.handlers import security_groups_proxy as proxy

    group = _make(real, "security_group", {"name": "okc-shape", "project_id": real.project})
    real.admin.request("POST", "/security-group-rules", ok=(201,), body={"security_group_rule": {
        "security_group_id": group["id"], "direction": "ingress", "protocol": "tcp", "port_range_min": 22,
        "port_range_max": 22, "remote_ip_prefix": "10.0.0.0/8"}})
    shown = real.caller.show_security_group(group["id"])
    view = proxy._group_view(shown, proxy._names(real.caller, [shown]))
    assert (view["name"], view["tenant_id"]) == ("okc-shape", real.project)
    assert [(r["ip_protocol"], r["from_port"], r["to_port"], r["ip_range"]) for r in view["rules"]] == [
        ("tcp", 22, 22, {"cidr": "10.0.0.0/8"})]  # Neutron's default egress rules are left out, as Nova does
    unknown = str(uuid.uuid4())
    with pytest.raises(errors.SecurityGroupNotFound) as caught:
        real.caller.show_security_group(unknown)
    # Nova's 404 shows neutronclient's text: Neutron's message, then the request id it answered with
    assert caught.value.message.startswith(f"Security group {unknown} does not exist\n"
                                           "Neutron server returns request_ids: ['req-")


def test_floating_ip_in_novas_shape(real):
    from openkeel_compute.api.handlers import networks_proxy as proxy

    nets = real.nets
    fip = _make(real, "floatingip", {"floating_network_id": nets["PUBLIC_NETWORK_ID"], "project_id": real.project})
    listed = real.caller.list_floating_ips(tenant_id=real.project)
    assert [f["id"] for f in listed] == [fip["id"]]
    shown = real.caller.show_floating_ip(fip["id"])
    view = proxy._fip_view(shown, real.caller.show_network(shown["floating_network_id"]),
                           proxy._ports_of(real.caller, real.project, [shown]).get(shown["id"]))
    assert view == {"fixed_ip": None, "id": fip["id"], "instance_id": None, "ip": fip["floating_ip_address"],
                    "pool": nets["PUBLIC_NETWORK_NAME"]}
    assert real.caller.show_floating_ip(str(uuid.uuid4())) is None


def test_security_group_writes_as_nova_sends_them(real):
    from openkeel_compute.api.handlers import network_common
    from openkeel_compute.api.handlers import security_groups_proxy as proxy

    group = real.caller.create_security_group("okc-writes", "made as Nova makes it")
    real.created.append(("security_group", group["id"]))
    assert network_common.neutron_group_view(group, {})["rules"] == []  # only Neutron's egress rules
    renamed = real.caller.update_security_group(group["id"], "okc-writes-2", "")
    assert (renamed["name"], renamed["description"]) == ("okc-writes-2", "")
    rule = proxy.new_ingress_rule("tcp", 22, "22", cidr=proxy.parse_cidr("10.0.0.0/8"))
    made = real.caller.create_security_group_rules([proxy._neutron_rule(rule, group["id"])])[0]
    assert network_common.rule_view(made, {}) == {
        "id": made["id"], "parent_group_id": group["id"], "ip_protocol": "tcp", "from_port": 22, "to_port": 22,
        "group": {}, "ip_range": {"cidr": "10.0.0.0/8"}}
    icmp = proxy.new_ingress_rule("icmp", -1, -1, group_id=group["id"])
    made = real.caller.create_security_group_rules([proxy._neutron_rule(icmp, group["id"])])[0]
    assert (made["port_range_min"], made["port_range_max"], made["remote_group_id"]) == (None, None, group["id"])
    real.caller.delete_security_group_rule(made["id"])
    with pytest.raises(errors.NeutronError) as caught:
        real.caller.delete_security_group_rule(made["id"])
    assert caught.value.status == 404
    # what Nova shows where it passes neutronclient's str(e) on: the message, then the request id
    assert caught.value.text.startswith(f"Security group rule {made['id']} does not exist\n"
                                        "Neutron server returns request_ids: ['req-")
    default = next(g for g in real.caller.list_security_groups(tenant_id=real.project) if g["name"] == "default")
    with pytest.raises(errors.NeutronError) as caught:
        real.caller.delete_security_group(default["id"])
    assert caught.value.status == 409  # Nova's 400 (Invalid) with this text


def test_floating_ip_allocate_associate_release(real):
    from openkeel_compute.api.handlers import network_common

    port = _make(real, "port", {"network_id": real.private, "project_id": real.project, "device_id": "okc-srv",
                                "device_owner": "compute:nova"})
    fip = real.caller.create_floating_ip(real.nets["PUBLIC_NETWORK_ID"])
    real.created.append(("floatingip", fip["id"]))
    assert network_common.fip_by_address(real.caller, fip["floating_ip_address"])["id"] == fip["id"]
    address = port["fixed_ips"][0]["ip_address"]
    real.caller.update_floating_ip(fip["id"], {"port_id": port["id"], "fixed_ip_address": address})
    found = network_common.fip_by_address(real.caller, fip["floating_ip_address"])
    assert network_common.fip_device(real.caller, found) == "okc-srv"
    real.caller.update_floating_ip(fip["id"], {"port_id": None})
    assert network_common.fip_device(real.caller, real.caller.show_floating_ip(fip["id"])) is None
    real.caller.delete_floating_ip(fip["id"])
    assert real.caller.show_floating_ip(fip["id"]) is None


def test_the_metadata_services_security_groups(real):
    """What the metadata service's EC2 security-groups read (metadata/service.py PortGroups, with the
    [neutron] credential, as Nova's metadata API): the groups of the server's ports, a group on two ports
    twice, a nameless group by its id; none for a server without ports."""
    from openkeel_compute.metadata.service import PortGroups

    server = str(uuid.uuid4())
    web = _make(real, "security_group", {"name": "okc-md-web", "project_id": real.project})
    nameless = _make(real, "security_group", {"name": "", "project_id": real.project})
    for groups in ([web["id"]], [web["id"], nameless["id"]]):
        _make(real, "port", {"network_id": real.private, "project_id": real.project, "device_id": server,
                             "device_owner": "compute:nova", "security_groups": groups})
    reading = PortGroups(real.conf)
    assert sorted(reading(server)) == sorted(["okc-md-web", "okc-md-web", nameless["id"]])
    assert reading(str(uuid.uuid4())) == ()
