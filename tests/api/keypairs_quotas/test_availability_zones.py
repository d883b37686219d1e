"""Availability zones: the controller publishes the cluster's nodes and their zone labels, the API
lists them as Nova does, boots are checked against them and the VM is kept in its zone."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.controller import nodes
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.emulator import Emulator
from openkeel_compute.emulator.server import node
from openkeel_compute.kubevirt.server import ServerOptions, compose, require_zone
from tests.api.servers.helpers import IMAGE, local_image_service, row_counts
from tests.kubevirt.objects import IMAGE as KV_IMAGE
from tests.kubevirt.objects import SERVER
from tests.kubevirt.objects import flavor_copy as _copy

MEMBER = {"X-Auth-Token": "demo:demo"}
ADMIN = {"X-Auth-Token": "admin:admin"}


def test_without_published_nodes_the_default_zone_stands_for_the_cluster(client):
    got = client.get("/v2.1/os-availability-zone", headers=MEMBER)
    assert (got.status_code, got.json) == (200, {"availabilityZoneInfo": [
        {"zoneName": "nova", "zoneState": {"available": True}, "hosts": None}]})
    denied = client.get("/v2.1/os-availability-zone/detail", headers=MEMBER)
    assert (denied.status_code, denied.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:os-availability-zone:detail to be performed.")


def test_the_controller_publishes_node_zones_from_the_cluster(client, conf):
    engine = db_api.get_engine(conf)
    with Emulator() as cluster:
        cluster.seed(node("n-a1", zone="az-a"))
        cluster.seed(node("n-b1", zone="az-b", ready=False))
        kube = Client(KubeConfig.from_dict(cluster.kubeconfig()))
        assert nodes.sync(engine, Gateway(kube)) == 3
        assert nodes.sync(engine, Gateway(kube)) == 0  # nothing changed
        listed = client.get("/v2.1/os-availability-zone", headers=MEMBER).json["availabilityZoneInfo"]
        assert listed == [{"zoneName": "az-a", "zoneState": {"available": True}, "hosts": None},
                          {"zoneName": "nova", "zoneState": {"available": True}, "hosts": None},
                          {"zoneName": "az-b", "zoneState": {"available": False}, "hosts": None}]
        detail = client.get("/v2.1/os-availability-zone/detail", headers=ADMIN).json["availabilityZoneInfo"]
        assert [(z["zoneName"], sorted(z["hosts"] or {})) for z in detail] == [
            ("az-a", ["n-a1"]), ("nova", ["emulated-node-1"]), ("az-b", [])]
        assert detail[0]["hosts"]["n-a1"]["nova-compute"]["available"] is True
        cluster.remove("Node", "n-b1")
        nodes.sync(engine, Gateway(kube))
    with db_api.reader(engine) as conn:
        assert sorted(conn.execute(sa.select(models.NODE_ZONES.c.node)).scalars()) == ["emulated-node-1", "n-a1"]


def test_a_cordoned_node_is_a_disabled_compute_service(client, conf):
    """kubectl cordon sets spec.unschedulable: the node counts for no zone and is not listed, as a
    disabled nova-compute; uncordoned, it is back."""
    engine = db_api.get_engine(conf)
    with Emulator() as cluster:
        cordoned = node("n-c1", zone="az-c")
        cordoned["spec"] = {"unschedulable": True}
        for obj in (node("n-a1", zone="az-a"), cordoned, node("n-a2", zone="az-a")):
            cluster.seed(obj)
        kube = Client(KubeConfig.from_dict(cluster.kubeconfig()))
        kube.patch(Node, "n-a2", {"spec": {"unschedulable": True}}, patch_type=PatchType.MERGE)  # kubectl cordon
        nodes.sync(engine, Gateway(kube))
        with db_api.reader(engine) as conn:
            assert dict(conn.execute(sa.select(models.NODE_ZONES.c.node, models.NODE_ZONES.c.cordoned)).all()) == {
                "emulated-node-1": False, "n-a1": False, "n-a2": True, "n-c1": True}
        listed = client.get("/v2.1/os-availability-zone", headers=MEMBER).json["availabilityZoneInfo"]
        assert [(z["zoneName"], z["zoneState"]["available"]) for z in listed] == [
            ("az-a", True), ("nova", True), ("az-c", False)]
        detail = client.get("/v2.1/os-availability-zone/detail", headers=ADMIN).json["availabilityZoneInfo"]
        assert [(z["zoneName"], sorted(z["hosts"] or {})) for z in detail] == [
            ("az-a", ["n-a1"]), ("nova", ["emulated-node-1"]), ("az-c", [])]
        kube.patch(Node, "n-c1", {"spec": {"unschedulable": False}}, patch_type=PatchType.MERGE)
        assert nodes.sync(engine, Gateway(kube)) == 1
        listed = client.get("/v2.1/os-availability-zone", headers=MEMBER).json["availabilityZoneInfo"]
        assert ("az-c", True) in [(z["zoneName"], z["zoneState"]["available"]) for z in listed]


@pytest.fixture
def zoned(client, conf, tmp_path):
    engine = db_api.get_engine(conf)
    nodes.publish(engine, {"n-a1": ("az-a", True, False), "n-b1": ("az-b", False, False)})
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
    with local_image_service(conf, tmp_path):
        yield client, engine


def boot_server(client, zone, flavor="1"):
    return client.post("/v2.1/servers", headers=dict(MEMBER, **{"OpenStack-API-Version": "compute 2.96"}),
                       json_body={"server": {"name": "z", "imageRef": IMAGE, "flavorRef": flavor,
                                             "networks": "none", "availability_zone": zone}})


def test_boots_go_only_to_zones_with_a_ready_node(zoned):
    client, engine = zoned
    before = row_counts(engine)
    for zone in ("az-b", "nowhere", "nova"):
        got = boot_server(client, zone)
        assert (got.status_code, got.json) == (400, {"badRequest": {
            "code": 400, "message": "The requested availability zone is not available"}}), zone
    assert row_counts(engine) == before
    # the flavor is looked up before the zone, as in Nova
    assert boot_server(client, "nowhere", flavor="99").json["badRequest"]["message"] == "Flavor 99 could not be found."
    got = boot_server(client, "az-a")
    assert got.status_code == 202, got.text
    shown = client.get(f"/v2.1/servers/{got.json['server']['id']}", headers=MEMBER).json["server"]
    assert shown["OS-EXT-AZ:availability_zone"] == "az-a"


def _terms(vm):
    return vm["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_a_server_in_a_zone_gets_a_required_node_affinity():
    vm = compose(dict(SERVER, availability_zone="az-a"), _copy(), KV_IMAGE, None).vm
    assert _terms(vm) == [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["az-a"]}]}]
    # the default zone also holds the nodes without a zone label
    vm = compose(dict(SERVER, availability_zone="nova"), _copy(), KV_IMAGE, None, ServerOptions()).vm
    assert [t["matchExpressions"][0]["operator"] for t in _terms(vm)] == ["In", "DoesNotExist"]
    assert "affinity" not in compose(SERVER, _copy(), KV_IMAGE, None).vm["spec"]["template"]["spec"]


def test_the_zone_joins_every_term_the_flavor_already_required():
    tspec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "openkeel.io/trait.X", "operator": "NotIn", "values": ["true"]}]}]}}}}
    require_zone(tspec, "az-a", "nova")
    (term,) = tspec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [e["key"] for e in term["matchExpressions"]] == ["openkeel.io/trait.X", "topology.kubernetes.io/zone"]
