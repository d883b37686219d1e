"""POST /servers with [neutron] set: the networks, ports, fixed IPs and security groups asked for are
checked against Neutron as Nova 34.0.0's API checks them (its words and codes), only with reads, and
what was asked is kept for the controller (instance_network_requests). A refusal writes nothing."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import network_requests
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import sysmeta
from tests.api.servers.helpers import IMAGE, local_image_service, row_counts
from tests.conftest import make_conf, user
from tests.databases import ENGINES, throwaway_database

UNKNOWN = "11111111-2222-3333-4444-555555555555"
PROJECT = "demo"


@pytest.fixture(scope="module", params=ENGINES)
def database_url(request, tmp_path_factory):
    with throwaway_database(request.param, tmp_path_factory.mktemp("db")) as url:
        yield url


@pytest.fixture
def world(tmp_path, neutron, database_url):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    policies.reset()
    conf = make_conf(tmp_path, database={"connection": database_url},
                     neutron={"auth_type": "admin_token", "endpoint": neutron.url, "token": "neutron-admin",
                              "endpoint_override": neutron.url})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    with local_image_service(conf, tmp_path):
        yield Client(deploy(conf)), engine, neutron
    db_api.dispose_all()
    policies.reset()


def _boot(client, version="2.104", **fields):
    server = {"name": "n1", "imageRef": IMAGE, "flavorRef": "1", **fields}
    return client.post("/v2.1/servers", headers=user(PROJECT, name="demo", version=version),
                       json_body={"server": server})


@pytest.fixture(autouse=True)
def _flavor(world):
    from openkeel_compute.catalog import errors as catalog_errors
    from openkeel_compute.catalog import flavors as catalog

    with db_api.transaction(world[1]) as conn:
        try:
            catalog.get(conn, "1")
        except catalog_errors.FlavorNotFound:  # not made yet in this engine's database
            catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")


def _refused(world, code, message, **fields):
    client, engine, _neutron = world
    before = row_counts(engine)
    resp = _boot(client, **fields)
    kind = {400: "badRequest", 403: "forbidden", 409: "conflictingRequest", 503: "computeFault"}[code]
    assert (resp.status_code, resp.json) == (code, {kind: {"code": code, "message": message}})
    assert row_counts(engine) == before


def test_unknown_network(world):
    _refused(world, 400, f"Network {UNKNOWN} could not be found.", networks=[{"uuid": UNKNOWN}])


def test_unknown_port(world):
    _refused(world, 400, f"Port id {UNKNOWN} could not be found.", networks=[{"port": UNKNOWN}])


def test_port_in_use(world):
    neutron = world[2]
    port = neutron.port(neutron.network(), device_id="a-server")
    _refused(world, 409, f"Port {port['id']} is still in use.", networks=[{"port": port["id"]}])


def test_port_without_fixed_ip(world):
    neutron = world[2]
    port = neutron.port(neutron.network(), fixed_ips=[])
    _refused(world, 400, f"Port {port['id']} requires a FixedIP in order to be used.", networks=[{"port": port["id"]}])


def test_fixed_ip_in_use(world):
    neutron = world[2]
    net = neutron.network()
    neutron.port(net, device_id="other-server", fixed_ips=[{"subnet_id": net["subnets"][0], "ip_address": "10.0.0.5"}])
    _refused(world, 400, "Fixed IP address 10.0.0.5 is already in use on instance other-server.",
             networks=[{"uuid": net["id"], "fixed_ip": "10.0.0.5"}])


def test_network_without_subnet(world):
    net = world[2].network(subnet=None)
    _refused(world, 400, f"Network {net['id']} requires a subnet in order to boot instances on.",
             networks=[{"uuid": net["id"]}])


def test_several_networks_without_choosing(world):
    neutron = world[2]
    neutron.network(shared=True)
    neutron.network()
    message = "Multiple possible networks found, use a Network ID to be more specific."
    _refused(world, 409, message, networks="auto")
    client, _engine, _ = world
    resp = _boot(client, version="2.36")  # no networks before 2.37: the same choice
    assert (resp.status_code, resp.json["conflictingRequest"]["message"]) == (409, message)


def test_auto_without_networks_nor_auto_allocation(world):
    world[2].auto_allocate_ok = False
    _refused(world, 400, f"Unable to automatically allocate a network for project {PROJECT}", networks="auto")


def test_port_quota(world):
    neutron = world[2]
    net = neutron.network()
    neutron.quotas[PROJECT] = {"port": 1}
    neutron.port(net)
    _refused(world, 403, "Maximum number of ports exceeded", networks=[{"uuid": net["id"]}])
    neutron.port(net)
    _refused(world, 403, "The number of defined ports: 2 is over the limit: 1", networks=[{"uuid": net["id"]}])


def test_port_quota_lowers_max_count(world):
    client, engine, neutron = world
    net = neutron.network()
    neutron.quotas[PROJECT] = {"port": 2}
    resp = _boot(client, networks=[{"uuid": net["id"]}], min_count=1, max_count=5, return_reservation_id=True)
    assert resp.status_code == 202
    reservation = resp.json["reservation_id"]
    with db_api.reader(engine) as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.INSTANCES).where(
            models.INSTANCES.c.reservation_id == reservation)).scalar() == 2


def test_several_servers_with_one_port_or_fixed_ip(world):
    neutron = world[2]
    net = neutron.network()
    port = neutron.port(net)
    _refused(world, 400, "Failed to launch instances: Unable to launch multiple instances with a single configured "
             "port ID. Please launch your instance one by one with different ports.",
             networks=[{"port": port["id"]}], max_count=2)
    _refused(world, 400, "Failed to launch instances: max_count cannot be greater than 1 if an fixed_ip is specified.",
             networks=[{"uuid": net["id"], "fixed_ip": "10.0.0.9"}], max_count=2)


def test_unknown_security_group(world):
    world[2].network()
    _refused(world, 400, "Unable to find security_group with name or id 'web'", networks="auto",
             security_groups=[{"name": "web"}])


def test_neutron_down(world):
    world[2].network()
    world[2].fail_with = 500
    client, engine, _ = world
    before = row_counts(engine)
    resp = _boot(client, networks="auto")
    assert resp.status_code == 503
    assert row_counts(engine) == before


def test_boot_keeps_what_was_asked_with_reads_only(world):
    client, engine, neutron = world
    net = neutron.network(shared=True)
    other = neutron.network()
    port = neutron.port(other)
    group = neutron.security_group("web")
    resp = _boot(client, networks=[{"uuid": net["id"], "fixed_ip": "10.0.0.50", "tag": "a"},
                                   {"port": port["id"], "tag": "b"}],
                 security_groups=[{"name": "web"}, {"name": "default"}])
    assert resp.status_code == 202, resp.json
    server_id = resp.json["server"]["id"]
    with db_api.reader(engine) as conn:
        rows = network_requests.of(conn, server_id)
        meta = dict(conn.execute(sa.select(models.INSTANCE_SYSTEM_METADATA.c.key,
                                           models.INSTANCE_SYSTEM_METADATA.c.value).where(
            models.INSTANCE_SYSTEM_METADATA.c.instance_uuid == server_id)).all())
    assert rows == [
        {"position": 0, "network_id": net["id"], "port_id": None, "fixed_ip": "10.0.0.50", "tag": "a",
         "port_created": False},
        {"position": 1, "network_id": other["id"], "port_id": port["id"], "fixed_ip": None, "tag": "b",
         "port_created": False}]
    assert meta[sysmeta.REQUESTED_NETWORKS] == "requested"
    assert meta[sysmeta.SECURITY_GROUPS] == '["web", "default"]'
    assert {r["method"] for r in neutron.requests} == {"GET"}
    assert {r["token"] for r in neutron.requests} == {f"demo:{PROJECT}"}
    assert group["id"]


def test_auto_on_the_lone_network(world):
    client, engine, neutron = world
    neutron.network(shared=True)
    resp = _boot(client, networks="auto")
    assert resp.status_code == 202, resp.json
    with db_api.reader(engine) as conn:
        assert network_requests.of(conn, resp.json["server"]["id"]) == []
        value = conn.execute(sa.select(models.INSTANCE_SYSTEM_METADATA.c.value).where(
            models.INSTANCE_SYSTEM_METADATA.c.instance_uuid == resp.json["server"]["id"],
            models.INSTANCE_SYSTEM_METADATA.c.key == sysmeta.REQUESTED_NETWORKS)).scalar()
    assert value == "auto"


def test_none_asks_neutron_nothing(world):
    client, _engine, neutron = world
    resp = _boot(client, networks="none")
    assert resp.status_code == 202, resp.json
    assert neutron.requests == []


def test_token_neutron_refuses(world):
    """Neutron refusing the caller's token is Nova's Unauthorized (401), nothing written."""
    client, engine, neutron = world
    neutron.network()
    neutron.fail_with = 401
    before = row_counts(engine)
    resp = _boot(client, networks="auto")
    assert resp.status_code == 401
    assert row_counts(engine) == before
