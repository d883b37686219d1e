"""A server sent to one node: the legacy forced host (availability_zone "zone:host", "zone:host:node",
"zone::node", admins only) and 2.74's host / hypervisor_hostname (validated against the cluster's
nodes), with Nova's policies and messages; the VM is pinned to the node by a required node affinity."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import names
from openkeel_compute.controller import nodes
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.kubevirt.server import compose
from tests.api.servers.helpers import IMAGE, local_image_service, row_counts
from tests.kubevirt.objects import IMAGE as KV_IMAGE
from tests.kubevirt.objects import SERVER
from tests.kubevirt.objects import flavor_copy as _copy

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset

ADMIN, MEMBER = "admin:admin", "demo:demo"


@pytest.fixture
def cloud(client, conf, tmp_path):
    engine = db_api.get_engine(conf)
    nodes.publish(engine, {"n-a1": ("az-a", True, False), "n-plain": (None, True, False)})
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
    with local_image_service(conf, tmp_path):
        yield client, engine


def boot_server(client, version="2.96", token=ADMIN, **fields):
    server = {"name": "f", "imageRef": IMAGE, "flavorRef": "1", "networks": "none", **fields}
    return client.post("/v2.1/servers", json_body={"server": server},
                       headers={"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"})


def _stored(engine, uuid) -> tuple[str | None, dict]:
    with db_api.reader(engine) as conn:
        zone = conn.execute(sa.select(models.INSTANCES.c.availability_zone)
                            .where(models.INSTANCES.c.uuid == uuid)).scalar()
        rows = conn.execute(sa.select(models.INSTANCE_SYSTEM_METADATA.c.key, models.INSTANCE_SYSTEM_METADATA.c.value)
                            .where(models.INSTANCE_SYSTEM_METADATA.c.instance_uuid == uuid))
        keys = (names.REQUESTED_HOST, names.REQUESTED_NODE, names.FORCED_DESTINATION)
        return zone, {key: value for key, value in rows if key in keys}


def last_fault(got) -> tuple[int, str]:
    body = got.json
    (kind,) = body
    return got.status_code, body[kind]["message"]


@pytest.mark.parametrize(("zone", "stored_zone", "destination"), [
    ("az-a:n-a1", "az-a", {"requested_host": "n-a1"}),
    ("nova:n-plain", "nova", {"requested_host": "n-plain"}),  # a node without a label is in the default zone
    ("az-a:n-a1:n-a1", "az-a", {"requested_host": "n-a1", "requested_hypervisor_hostname": "n-a1"}),
    ("az-a::n-a1", None, {"requested_hypervisor_hostname": "n-a1"}),  # no host: only the default zone is kept
    ("az-b:n-a1", None, {"requested_host": "n-a1"}),  # the node decides; the zone asked for is dropped
    (":n-a1", None, {"requested_host": "n-a1"}),
    ("az-a:unknown-node", None, {"requested_host": "unknown-node"}),  # forced: not checked, as in Nova
])
def test_an_admin_forces_a_node_through_the_availability_zone(cloud, zone, stored_zone, destination):
    client, engine = cloud
    got = boot_server(client, availability_zone=zone)
    assert got.status_code == 202, got.text
    assert _stored(engine, got.json["server"]["id"]) == (stored_zone, dict(destination, forced_destination="True"))


def test_forcing_a_host_is_for_admins_only(cloud):
    client, engine = cloud
    before = row_counts(engine)
    assert last_fault(boot_server(client, token=MEMBER, availability_zone="az-a:n-a1")) == (
        403, "Policy doesn't allow os_compute_api:servers:create:forced_host to be performed.")
    assert last_fault(boot_server(client, token=MEMBER, availability_zone="::n-a1")) == (
        403, "Policy doesn't allow os_compute_api:servers:create:forced_host to be performed.")
    # "zone:" names no host: an ordinary zone request
    assert boot_server(client, token=MEMBER, availability_zone="az-a:").status_code == 202
    assert last_fault(boot_server(client, availability_zone="a:b:c:d")) == (
        400, "Invalid input received: Unable to parse availability_zone")
    assert row_counts(engine)[0] == before[0] + 1


@pytest.mark.parametrize(("fields", "message"), [
    ({"host": "nowhere"}, "Compute host nowhere could not be found."),
    ({"hypervisor_hostname": "nowhere"}, "Compute host nowhere could not be found."),
    ({"host": "n-a1", "hypervisor_hostname": "n-plain"}, "Compute host n-a1 could not be found."),
    ({"host": "nowhere", "hypervisor_hostname": "n-a1"}, "Compute host nowhere could not be found."),
    ({"host": "n-a1", "availability_zone": "az-a:n-a1"},
     ("One mechanism with host and/or hypervisor_hostname and another mechanism with zone:host:node are "
      "mutually exclusive.")),
    ({"host": "bad host"}, None),  # Nova's fqdn pattern
])
def test_a_requested_destination_must_be_a_node_of_the_cluster(cloud, fields, message):
    client, engine = cloud
    before = row_counts(engine)
    status, text = last_fault(boot_server(client, version="2.74", **fields))
    assert status == 400
    if message:
        assert text == message
    assert row_counts(engine) == before


def test_a_requested_destination_is_kept_for_the_scheduler(cloud):
    client, engine = cloud
    got = boot_server(client, version="2.74", host="n-a1", hypervisor_hostname="n-a1")
    assert got.status_code == 202, got.text
    assert _stored(engine, got.json["server"]["id"]) == (None, {"requested_host": "n-a1",
                                                                "requested_hypervisor_hostname": "n-a1"})
    got = boot_server(client, version="2.74", hypervisor_hostname="n-plain")
    assert got.status_code == 202, got.text


def test_requested_destinations_are_for_admins_and_from_2_74(cloud):
    client, _engine = cloud
    assert last_fault(boot_server(client, version="2.74", token=MEMBER, host="n-a1")) == (
        403, "Policy doesn't allow compute:servers:create:requested_destination to be performed.")
    status, message = last_fault(boot_server(client, version="2.73", host="n-a1"))
    assert status == 400 and "Additional properties are not allowed ('host' was unexpected)" in message


def _terms(vm):
    return vm["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_the_vm_is_pinned_to_its_node_within_its_zone():
    metadata = {names.REQUESTED_HOST: "n-a1", names.FORCED_DESTINATION: "True"}
    vm = compose(dict(SERVER, system_metadata=metadata), _copy(), KV_IMAGE, None).vm
    assert _terms(vm) == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                 "values": ["n-a1"]}]}]
    vm = compose(dict(SERVER, availability_zone="az-a", system_metadata=metadata), _copy(), KV_IMAGE, None).vm
    assert [[e["key"] for e in t["matchExpressions"]] for t in _terms(vm)] == [
        ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]]


def test_a_host_and_node_that_differ_leave_the_vm_nowhere_to_run():
    metadata = {names.REQUESTED_HOST: "n-a1", names.REQUESTED_NODE: "n-b1"}
    vm = compose(dict(SERVER, system_metadata=metadata), _copy(), KV_IMAGE, None).vm
    (term,) = _terms(vm)
    assert sorted(json.dumps(e, sort_keys=True) for e in term["matchExpressions"]) == [
        json.dumps({"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}, sort_keys=True)
        for n in ("n-a1", "n-b1")]
    assert names.requested_nodes(metadata) == ("n-a1", "n-b1")
    assert names.requested_nodes({}) == () and not names.destination_forced(metadata)


def test_end_to_end_a_forced_server_runs_on_its_node_and_an_unknown_node_is_no_valid_host(tmp_path, db_engine):
    """API → controller → built-in cluster: the node named is where the server runs; a node the cluster
    does not have leaves the VM Unschedulable and the server in ERROR, as Nova's "No valid host"."""
    import time

    from openkeel_compute.controller.servers import make_loop
    from openkeel_compute.db import migration
    from openkeel_compute.emulator.server import node
    from openkeel_compute.images import glance
    from tests.conftest import admin, conf_on
    from tests.server_world import IMAGE as WORLD_IMAGE
    from tests.server_world import image_service, server_world

    headers = admin("2.96")
    with conf_on(db_engine, tmp_path, controller={"poll_interval": "0.05", "unschedulable_grace": "0"}) as conf, \
            image_service(tmp_path) as url:
        migration.sync(db_api.get_engine(conf))
        glance.register_opts(conf)
        conf.set_override("api_servers", [url], group="glance")
        with server_world(conf, lambda kube: make_loop(kube, db_api.get_engine(conf))) as (client, controller,
                                                                                          cluster):
            cluster.seed(node("n-a1", zone="az-a"))
            nodes.publish(db_api.get_engine(conf), {"n-a1": ("az-a", True, False), "emulated-node-1": (None, True, False)})
            assert client.post("/v2.1/flavors", headers=admin(), json_body={
                "flavor": {"name": "m1.f", "ram": 512, "vcpus": 1, "disk": 1, "id": "f"}}).status_code == 200
            booted = {}
            for zone in ("az-a:n-a1", "nova:ghost"):
                got = client.post("/v2.1/servers", headers=headers, json_body={"server": {
                    "name": zone, "imageRef": WORLD_IMAGE, "flavorRef": "f", "networks": "none",
                    "availability_zone": zone}})
                assert got.status_code == 202, got.text
                booted[zone] = got.json["server"]["id"]
            shown = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(shown) < 2:
                controller.run_once()
                for zone, uuid in booted.items():
                    server = client.get(f"/v2.1/servers/{uuid}", headers=headers).json["server"]
                    if server["status"] in ("ACTIVE", "ERROR"):
                        shown[zone] = server
                time.sleep(0.05)
    running, lost = shown["az-a:n-a1"], shown["nova:ghost"]
    assert (running["status"], running["OS-EXT-SRV-ATTR:host"], running["OS-EXT-AZ:availability_zone"]) == (
        "ACTIVE", "n-a1", "az-a")
    assert lost["status"] == "ERROR" and lost["fault"]["message"].startswith("No valid host was found."), lost
