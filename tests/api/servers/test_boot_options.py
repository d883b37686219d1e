"""POST /servers: networks, security groups, availability zone, scheduler hints, access IPs and
names, and PUT's zone pinning (2.104), against the answers of the Nova 34.0.0 servers oracle
(recorded here as literals). A refusal writes nothing."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import networks
from openkeel_compute.compute.instances import store
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers.helpers import local_image_service, row_counts
from tests.conftest import user

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset

IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
UNKNOWN = "11111111-2222-3333-4444-555555555555"
POD = networks.network_id(networks.POD_NETWORK)


@pytest.fixture
def engine(app, conf):
    return db_api.get_engine(conf)


@pytest.fixture
def flavors(engine):
    """priv-small, shared with the project demo."""
    from openkeel_compute.catalog import flavors as catalog

    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="priv.small", memory_mb=512, vcpus=1, root_gb=1, flavorid="priv-small",
                       is_public=False)
        catalog.add_access(conn, catalog.get(conn, "priv-small"), "demo")


@pytest.fixture
def images(conf, tmp_path):
    with local_image_service(conf, tmp_path):
        yield


def boot_server(client, version="2.104", hints=None, **fields):
    server = {"name": "v1", "imageRef": IMAGE, "flavorRef": "priv-small", "networks": "auto", **fields}
    body = {"server": server}
    if hints is not None:
        body["os:scheduler_hints"] = hints
    return client.post("/v2.1/servers", headers=user("demo", name="demo", version=version), json_body=body)


def _bad(message: str) -> dict:
    return {"badRequest": {"code": 400, "message": message}}


@pytest.mark.parametrize(("fields", "version", "message"), [
    # test_create_with_nonexistent_security_group
    ({"security_groups": [{"name": "does_not_exist"}]}, "2.104",
     "Unable to find security_group with name or id 'does_not_exist'"),
    # test_create_with_invalid_network_uuid
    ({"networks": [{"fixed_ip": "10.0.1.1", "uuid": "a-b-c-d-e-f-g-h-i-j"}]}, "2.104",
     ("Invalid input for field/attribute networks. Value: [{'fixed_ip': '10.0.1.1', 'uuid': 'a-b-c-d-e-f-g-h-i-j'}]. "
     "[{'fixed_ip': '10.0.1.1', 'uuid': 'a-b-c-d-e-f-g-h-i-j'}] is not valid under any of the given schemas")),
    ({"networks": [{"uuid": "a-b-c"}]}, "2.36", "Bad networks format: network uuid is not in proper format (a-b-c)"),
    ({"networks": [{"uuid": UNKNOWN}]}, "2.104", f"Network {UNKNOWN} could not be found."),
    ({"networks": [{"uuid": UNKNOWN, "fixed_ip": "10.0.0.5"}]}, "2.104", f"Network {UNKNOWN} could not be found."),
    ({"networks": [{"port": UNKNOWN}]}, "2.104", f"Port id {UNKNOWN} could not be found."),
    ({"networks": [{"port": UNKNOWN, "fixed_ip": "10.0.0.5"}]}, "2.104",
     f"Specified Fixed IP '10.0.0.5' cannot be used with port '{UNKNOWN}': the two cannot be specified together."),
    ({"networks": [{"port": UNKNOWN}, {"port": UNKNOWN}]}, "2.104",
     f"Port ID '{UNKNOWN}' was specified twice: you cannot attach a port multiple times."),
    ({"networks": [{"fixed_ip": "10.0.0.5"}]}, "2.104", "Bad network format: missing 'uuid'"),
    ({"networks": [{}]}, "2.104", "Bad network format: missing 'uuid'"),
    ({"networks": [{"uuid": UNKNOWN, "tag": "t"}]}, "2.41",
     (f"Invalid input for field/attribute networks. Value: [{{'uuid': '{UNKNOWN}', 'tag': 't'}}]. "
     f"[{{'uuid': '{UNKNOWN}', 'tag': 't'}}] is not valid under any of the given schemas")),
    ({"networks": [{"uuid": UNKNOWN, "tag": "t"}]}, "2.42", f"Network {UNKNOWN} could not be found."),
    # test_invalid_access_ip_v4_address, test_invalid_ip_v6_address
    ({"accessIPv4": "1.1.1.1.1.1"}, "2.104",
     "Invalid input for field/attribute accessIPv4. Value: 1.1.1.1.1.1. '1.1.1.1.1.1' is not a 'ipv4'"),
    ({"accessIPv6": "notvalid"}, "2.104",
     "Invalid input for field/attribute accessIPv6. Value: notvalid. 'notvalid' is not a 'ipv6'"),
    ({"availability_zone": "zzz"}, "2.104", "The requested availability zone is not available"),
    # Nova's order: flavor, zone, image, security groups, networks
    ({"availability_zone": "zzz", "flavorRef": "999"}, "2.104", "Flavor 999 could not be found."),
    ({"availability_zone": "zzz", "imageRef": UNKNOWN}, "2.104", "The requested availability zone is not available"),
    ({"imageRef": UNKNOWN, "networks": [{"uuid": UNKNOWN}]}, "2.104", "Can not find requested image"),
    ({"security_groups": [{"name": "nope"}], "networks": [{"uuid": UNKNOWN}]}, "2.104",
     "Unable to find security_group with name or id 'nope'"),
    ({"flavorRef": "999", "networks": [{"fixed_ip": "10.0.0.1"}]}, "2.104", "Bad network format: missing 'uuid'"),
    # test_create_numeric_server_name, test_create_server_name_length_exceeds_256
    ({"name": 12345}, "2.104", "Invalid input for field/attribute name. Value: 12345. 12345 is not of type 'string'"),
    ({"name": "a" * 256}, "2.104",
     f"Invalid input for field/attribute name. Value: {'a' * 256}. '{'a' * 256}' is too long"),
    ({"metadata": {"a" * 256: "v"}}, "2.104",
     (f"Invalid input for field/attribute metadata. Value: {{'{'a' * 256}': 'v'}}. '{'a' * 256}' does not match any of "
     "the regexes: '^[a-zA-Z0-9-_:. ]{1,255}$'")),
    ({"metadata": {"k": "v" * 256}}, "2.104",
     f"Invalid input for field/attribute k. Value: {'v' * 256}. '{'v' * 256}' is too long"),
])
def test_refusals_as_nova(client, engine, images, flavors, fields, version, message):
    before = row_counts(engine)
    got = boot_server(client, version=version, **fields)
    assert (got.status_code, got.json) == (400, _bad(message))
    assert row_counts(engine) == before


@pytest.mark.parametrize(("hints", "message"), [
    ({"different_host": "abc"},
     "Invalid input for field/attribute different_host. Value: abc. 'abc' is not valid under any of the given schemas"),
    ({"group": "abc"}, ("Invalid input for field/attribute group. Value: abc. 'abc' is not valid under any of the given "
                       "schemas")),
    ({"cidr": "abc"}, "Invalid input for field/attribute cidr. Value: abc. 'abc' does not match '^/[0-9a-f.:]+$'"),
    ({"build_near_host_ip": "abc"},
     ("Invalid input for field/attribute build_near_host_ip. Value: abc. 'abc' is not valid under any of the given "
     "schemas")),
    # Nova answers 500 for a value it cannot keep as strings; OpenKeel refuses it
    ({"query": {"a": 1}}, ("Invalid scheduler hint query: its value must be a string, a number or a boolean, or a "
                          "list of them.")),
    ({"y": None}, "Invalid scheduler hint y: its value must be a string, a number or a boolean, or a list of them."),
])
def test_scheduler_hint_refusals(client, engine, images, flavors, hints, message):
    before = row_counts(engine)
    got = boot_server(client, hints=hints)
    assert (got.status_code, got.json) == (400, _bad(message))
    assert row_counts(engine) == before


def _show(client, uuid, version="2.104"):
    return client.get(f"/v2.1/servers/{uuid}", headers=user("demo", name="demo", version=version)).json["server"]


def _place(engine, uuid, host="openkeel"):
    """What the controller does when the VirtualMachine runs: a host, ACTIVE, the pod address."""
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(
            host=host, node=host, vm_state="active", task_state=None, power_state=1,
            network_info=json.dumps({networks.POD_NETWORK: [
                {"version": 4, "addr": "10.244.0.7", "OS-EXT-IPS:type": "fixed",
                 "OS-EXT-IPS-MAC:mac_addr": "02:00:00:00:00:01"}]})))


def test_scheduler_hints_are_kept_as_nova_keeps_them(client, engine, images, flavors):
    same = "343ab104-934c-4f15-895b-4d0fb6580336"
    got = boot_server(client, hints={"same_host": [same], "query": '[">=","$free_ram_mb",1]', "foo": 1, "bar": [1, 2],
                               "x": True, "z": 1.5, "_nova_x": "y"})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert _show(client, uuid)["scheduler_hints"] == {
        "same_host": [same], "query": ['[">=","$free_ram_mb",1]'], "foo": ["1"], "bar": ["1", "2"], "x": ["True"],
        "z": ["1.5"]}
    assert "scheduler_hints" not in _show(client, uuid, "2.99")
    # test_create_server_with_scheduling_hint: a same_host hint naming any string is accepted
    got = boot_server(client, hints={"same_host": "abc"})
    assert got.status_code == 202
    assert _show(client, got.json["server"]["id"])["scheduler_hints"] == {"same_host": ["abc"]}
    got = boot_server(client)
    assert _show(client, got.json["server"]["id"])["scheduler_hints"] == {}


def test_pod_network_groups_and_addresses(client, engine, images, flavors):
    """A boot naming the pod network by its uuid, in the default group, shows one address on it."""
    assert POD == "71c93d0b-b097-5cc5-8f31-fcbd40fb53a6"  # documented: it must never change
    got = boot_server(client, networks=[{"uuid": POD}], security_groups=[{"name": "default"}, {"name": "default"}])
    assert got.status_code == 202, got.text
    # the answer repeats the groups asked for, as Nova's does
    assert got.json["server"]["security_groups"] == [{"name": "default"}, {"name": "default"}]
    uuid = got.json["server"]["id"]
    assert "security_groups" not in _show(client, uuid)  # not placed yet: no interface
    _place(engine, uuid)
    shown = _show(client, uuid)
    assert shown["security_groups"] == [{"name": "default"}]
    assert list(shown).index("security_groups") == list(shown).index("OS-SRV-USG:terminated_at") + 1
    ips = client.get(f"/v2.1/servers/{uuid}/ips", headers=user("demo", name="demo"))
    assert ips.json == {"addresses": {networks.POD_NETWORK: [{"version": 4, "addr": "10.244.0.7"}]}}
    got = boot_server(client, networks=[{"uuid": POD, "fixed_ip": "10.0.0.5"}])
    assert (got.status_code, got.json) == (400, _bad(
        "Fixed IP 10.0.0.5 cannot be requested on network pod-network: its addresses are given by the cluster."))


def test_networks_none_gives_no_interface(client, engine, images, flavors):
    got = boot_server(client, networks="none")
    assert got.json["server"]["security_groups"] == [{"name": "default"}]
    uuid = got.json["server"]["id"]
    _place(engine, uuid)
    assert "security_groups" not in _show(client, uuid)
    with db_api.reader(engine) as conn:
        assert not networks.has_interface(conn, store.get(conn, uuid))


def test_access_ips_are_kept_in_canonical_form(client, engine, images, flavors):
    """test_create_server_with_ipv6_addr_only and the oracle's canonical form of an IPv6 address."""
    got = boot_server(client, accessIPv6="0000:0000:0000:0000:0000:babe:220.12.22.2")
    assert _show(client, got.json["server"]["id"])["accessIPv6"] == "::babe:dc0c:1602"
    got = boot_server(client, accessIPv6="2001:2001::3")
    shown = _show(client, got.json["server"]["id"])
    assert (shown["accessIPv4"], shown["accessIPv6"]) == ("", "2001:2001::3")


def test_names_multibyte_and_repeated(client, engine, images, flavors):
    """test_create_server_specify_multibyte_character_name, test_create_with_existing_server_name."""
    name = "\u20a1-server"
    first = boot_server(client, name=name)
    second = boot_server(client, name=name)
    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json["server"]["id"] != second.json["server"]["id"]
    assert _show(client, first.json["server"]["id"])["name"] == _show(client, second.json["server"]["id"])["name"] \
        == name


def _put(client, uuid, zone, version="2.104"):
    return client.put(f"/v2.1/servers/{uuid}", headers=user("demo", name="demo", version=version),
                      json_body={"server": {"pinned_availability_zone": zone}})


def test_pinned_zone_as_nova(client, engine, images, flavors):
    """ServersUpdatePinnedAZ2104Test and the oracle's answers to pin, unpin and re-pin."""
    got = boot_server(client, availability_zone="nova")
    uuid = got.json["server"]["id"]
    _place(engine, uuid)
    shown = _show(client, uuid)
    assert (shown["pinned_availability_zone"], shown["OS-EXT-AZ:availability_zone"]) == ("nova", "nova")
    got = _put(client, uuid, "other")
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {"code": 409, "message": (
        "Cannot change pinned availability zone directly. Unpin first by setting pinned_availability_zone to null.")}})
    assert _put(client, uuid, "nova").json["server"]["pinned_availability_zone"] == "nova"
    assert _put(client, uuid, None).json["server"]["pinned_availability_zone"] is None
    assert _show(client, uuid)["pinned_availability_zone"] is None
    assert _put(client, uuid, None).json["server"]["pinned_availability_zone"] is None
    got = _put(client, uuid, "other")
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {"code": 409, "message": (
        "Server can only be pinned to its current availability zone 'nova', but 'other' was requested.")}})
    got = _put(client, uuid, "")
    assert (got.status_code, got.json) == (400, _bad(
        "Invalid input for field/attribute pinned_availability_zone. Value: . '' is not valid under any of the given "
        "schemas"))
    got = _put(client, uuid, "nova", version="2.103")
    assert (got.status_code, got.json) == (400, _bad(
        "Invalid input for field/attribute server. Value: {'pinned_availability_zone': 'nova'}. Additional "
        "properties are not allowed ('pinned_availability_zone' was unexpected)"))
    assert _put(client, uuid, "nova").json["server"]["pinned_availability_zone"] == "nova"
    # a server booted without a zone is not pinned, and shows the default zone once placed
    got = boot_server(client)
    uuid = got.json["server"]["id"]
    _place(engine, uuid)
    shown = _show(client, uuid)
    assert (shown["pinned_availability_zone"], shown["OS-EXT-AZ:availability_zone"]) == (None, "nova")


def test_the_default_zone_is_configurable(client, engine, images, flavors, conf):
    conf.set_override("default_availability_zone", "zone-a")
    assert boot_server(client, availability_zone="nova").json == _bad("The requested availability zone is not available")
    got = boot_server(client, availability_zone="zone-a")
    assert got.status_code == 202
    _place(engine, got.json["server"]["id"])
    assert _put(client, got.json["server"]["id"], "zone-a").status_code == 200
    uuid = boot_server(client).json["server"]["id"]
    _place(engine, uuid)
    assert _show(client, uuid)["OS-EXT-AZ:availability_zone"] == "zone-a"


def test_admins_filter_by_host(client, engine, images, flavors):
    """Tempest's test_list_servers_filter_by_exist_host: the host an admin sees filters the list."""
    uuid = boot_server(client).json["server"]["id"]
    _place(engine, uuid, host="node-1")
    headers = {"X-Auth-Token": "admin:admin"}
    host = client.get(f"/v2.1/servers/{uuid}", headers=headers).json["server"]["OS-EXT-SRV-ATTR:host"]
    assert host == "node-1"
    listed = client.get(f"/v2.1/servers?host={host}&all_tenants=1", headers=headers).json["servers"]
    assert [s["id"] for s in listed] == [uuid]
    assert client.get("/v2.1/servers?host=nonexistent_host&all_tenants=1", headers=headers).json["servers"] == []
    assert [s["id"] for s in client.get("/v2.1/servers?node=node-1&all_tenants=1", headers=headers).json[
        "servers"]] == [uuid]


def test_a_server_can_be_pinned_to_its_nodes_zone(client, engine, images, flavors):
    """A node's zone label (as the controller publishes it) is the zone of the servers on it."""
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.NODE_ZONES), [{"node": "node-z", "zone": "zone-b", "available": True}])
    uuid = boot_server(client).json["server"]["id"]
    _place(engine, uuid, host="node-z")
    got = _put(client, uuid, "nova")
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (409, (
        "Server can only be pinned to its current availability zone 'zone-b', but 'nova' was requested."))
    assert _put(client, uuid, "zone-b").json["server"]["pinned_availability_zone"] == "zone-b"
