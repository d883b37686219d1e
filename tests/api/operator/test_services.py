"""os-services: the cluster's nodes as nova-compute services (list, update at every microversion,
delete), their state from the nodes' Ready condition and the controller's heartbeat, and disabling as a
cordon of the node, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import datetime as dt
import uuid

import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.controller import compute_services, providers
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin, user

NODES = ["emulated-node-1", "emulated-node-2", "emulated-node-3"]


def _services(api, version="2.53", query=""):
    got = api.get(f"/v2.1/os-services{query}", headers=admin(version))
    assert got.status_code == 200, got.text
    return got.json["services"]


def _by_host(api, host, version="2.53"):
    return next(s for s in _services(api, version) if s["host"] == host)


def test_each_node_is_an_up_enabled_nova_compute_service(api):
    listed = _services(api)
    assert [s["host"] for s in listed] == NODES
    for service in listed:
        assert set(service) == {"binary", "host", "id", "zone", "status", "state", "updated_at",
                                "disabled_reason", "forced_down"}
        assert (service["binary"], service["zone"], service["status"], service["state"]) == (
            "nova-compute", "nova", "enabled", "up")
        assert uuid.UUID(service["id"]) and service["disabled_reason"] is None and service["forced_down"] is False
        assert dt.datetime.fromisoformat(service["updated_at"])
    old = _services(api, "2.1")
    assert [type(s["id"]) for s in old] == [int] * 3 and "forced_down" not in old[0]
    assert "forced_down" in _services(api, "2.11")[0]


def test_host_and_binary_filter_and_275_refuses_other_parameters(api):
    assert [s["host"] for s in _services(api, query="?host=emulated-node-2")] == ["emulated-node-2"]
    assert _services(api, query="?binary=nova-scheduler") == []
    assert len(_services(api, "2.74", "?foo=1")) == 3
    got = api.get("/v2.1/os-services?foo=1", headers=admin("2.75"))
    assert got.status_code == 400
    assert got.json["badRequest"]["message"] == "Additional properties are not allowed ('foo' was unexpected)"


def test_only_admins_list(api):
    got = api.get("/v2.1/os-services", headers=user())
    assert got.status_code == 403
    assert got.json["forbidden"]["message"] == "Policy doesn't allow os_compute_api:os-services:list to be performed."


def test_a_node_not_ready_is_down_once_its_heartbeat_is_older_than_service_down_time(api, cluster, publish, engine):
    cluster.set_node_ready("emulated-node-2", False)
    publish()
    assert _by_host(api, "emulated-node-2")["state"] == "up", "within service_down_time it is still up"
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.COMPUTE_SERVICES).values(
            last_seen_up=models.utcnow() - dt.timedelta(seconds=61)))
    publish()
    assert {s["host"]: s["state"] for s in _services(api)} == {
        "emulated-node-1": "up", "emulated-node-2": "down", "emulated-node-3": "up"}


def test_disable_with_reason_cordons_the_node_and_enable_uncordons_it(api, cluster, publish):
    service = _by_host(api, "emulated-node-1")
    got = api.put(f"/v2.1/os-services/{service['id']}", headers=admin("2.53"),
                  json_body={"status": "disabled", "disabled_reason": "maintenance"})
    assert got.status_code == 200, got.text
    assert got.json["service"] == dict(service, status="disabled", disabled_reason="maintenance",
                                       updated_at=got.json["service"]["updated_at"])
    assert publish() == ["emulated-node-1"]
    node = cluster.get("Node", "emulated-node-1")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["openkeel.io/disabled-reason"] == "maintenance"
    assert publish() == [], "done once"
    assert _by_host(api, "emulated-node-1")["status"] == "disabled"
    got = api.put(f"/v2.1/os-services/{service['id']}", headers=admin("2.53"), json_body={"status": "enabled"})
    assert got.json["service"]["status"] == "enabled" and got.json["service"]["disabled_reason"] is None
    publish()
    node = cluster.get("Node", "emulated-node-1")
    assert not node["spec"].get("unschedulable")
    assert "openkeel.io/disabled-reason" not in (node["metadata"].get("annotations") or {})


def test_a_cordon_made_on_the_cluster_disables_the_service(api, cluster, publish, gateway):
    gateway.patch("Node", "", "emulated-node-3", {"spec": {"unschedulable": True}, "metadata": {
        "annotations": {"openkeel.io/disabled-reason": "kernel upgrade"}}}, patch="merge")
    publish()
    service = _by_host(api, "emulated-node-3")
    assert (service["status"], service["disabled_reason"]) == ("disabled", "kernel upgrade")
    gateway.patch("Node", "", "emulated-node-3", {"spec": {"unschedulable": None}}, patch="merge")
    publish()
    assert _by_host(api, "emulated-node-3")["status"] == "enabled"


def test_the_cordoned_or_forced_down_node_carries_compute_status_disabled():
    node = {"metadata": {"name": "n1", "labels": {"kubevirt.io/schedulable": "true"}},
            "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                   "allocatable": {"cpu": "4", "memory": "8Gi"}}}
    assert providers.DISABLED_TRAIT not in providers.desired(node, providers.Ratios(), providers.Labels()).traits
    assert providers.DISABLED_TRAIT in providers.desired(node, providers.Ratios(), providers.Labels(),
                                                         forced_down=True).traits


def test_pre_253_actions_answer_as_nova(api, cluster, publish):
    def put(action, body, version="2.1"):
        return api.put(f"/v2.1/os-services/{action}", headers=admin(version), json_body=body)

    host = {"host": "emulated-node-2", "binary": "nova-compute"}
    got = put("disable-log-reason", dict(host, disabled_reason="flaky disk"))
    assert got.json == {"service": dict(host, status="disabled", disabled_reason="flaky disk")}
    publish()
    assert cluster.get("Node", "emulated-node-2")["spec"]["unschedulable"] is True
    assert put("enable", host).json == {"service": dict(host, status="enabled")}
    assert put("disable", dict(host, disabled_reason="ignored")).json == {"service": dict(host, status="disabled")}
    assert _by_host(api, "emulated-node-2", "2.1")["disabled_reason"] is None
    assert put("disable-log-reason", host).json["badRequest"]["message"] == "Missing disabled reason field"
    assert put("force-down", host).json["itemNotFound"]["message"] == "Unknown action"
    assert put("force-down", host, "2.11").json["badRequest"]["message"] == "Missing forced_down field"
    got = put("force-down", dict(host, forced_down="true"), "2.11")
    assert got.json == {"service": dict(host, forced_down=True)}
    assert _by_host(api, "emulated-node-2")["state"] == "down"
    assert put("bogus", host).json["itemNotFound"]["message"] == "Unknown action"
    assert put("enable", {"host": "nohost", "binary": "nova-compute"}).json["itemNotFound"]["message"] == (
        "Host 'nohost' is not mapped to any cell")
    assert put("enable", {"host": "emulated-node-2", "binary": "nova-scheduler"}).json["badRequest"]["message"] == (
        "Updating a nova-scheduler service is not supported. Only nova-compute services can be updated.")
    assert put("enable", {"host": "emulated-node-2"}).status_code == 400


def test_253_update_errors_and_forced_down(api):
    service = _by_host(api, "emulated-node-1")

    def put(ident, body):
        return api.put(f"/v2.1/os-services/{ident}", headers=admin("2.53"), json_body=body)

    assert put("abc", {}).json["badRequest"]["message"] == "Invalid uuid abc"
    missing = str(uuid.uuid4())
    assert put(missing, {"status": "enabled"}).json["itemNotFound"]["message"] == (
        f"Service {missing} could not be found.")
    assert put(service["id"], {}).json["badRequest"]["message"] == (
        "No updates were requested. Fields 'status' or 'forced_down' should be specified.")
    assert put(service["id"], {"status": "enabled", "disabled_reason": "x"}).json["badRequest"]["message"] == (
        "Specifying 'disabled_reason' with status 'enabled' is invalid.")
    assert put(service["id"], {"status": "paused"}).status_code == 400
    got = put(service["id"], {"status": "disabled", "forced_down": True})
    assert (got.json["service"]["state"], got.json["service"]["forced_down"]) == ("down", True)
    got = put(service["id"], {"forced_down": "false", "status": "enabled"})
    assert (got.json["service"]["state"], got.json["service"]["status"]) == ("up", "enabled")


def test_forcing_up_is_refused_while_done_evacuations_remain(api, engine):
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.MIGRATIONS).values(
            uuid=str(uuid.uuid4()), source_compute="emulated-node-3", status="done", migration_type="evacuation",
            created_at=models.utcnow(), deleted=0))
    service = _by_host(api, "emulated-node-3")
    got = api.put(f"/v2.1/os-services/{service['id']}", headers=admin("2.53"), json_body={"forced_down": False})
    assert got.status_code == 400
    assert got.json["badRequest"]["message"].startswith(
        "Unable to force up host emulated-node-3 as `done` evacuation migration records remain")


def test_delete_refused_while_servers_are_on_the_node_then_done(api, engine, publish):
    service = _by_host(api, "emulated-node-1")
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="t")
        store.create(conn, actor=Actor("u", "p"), flavor=catalog.get(conn, "t"), extra_specs={}, display_name="s",
                     uuid="00000000-0000-4000-8000-000000000001")
        conn.execute(sa.update(models.INSTANCES).values(host="emulated-node-1", node="emulated-node-1"))
    got = api.delete(f"/v2.1/os-services/{service['id']}", headers=admin("2.53"))
    assert got.status_code == 409
    assert got.json["conflictingRequest"]["message"] == (
        "Unable to delete compute service that is hosting instances. Migrate or delete the instances first.")
    other = _by_host(api, "emulated-node-2", "2.1")
    assert api.delete("/v2.1/os-services/abc", headers=admin()).json["badRequest"]["message"] == (
        "Invalid input received: id must be an integer")
    assert api.delete("/v2.1/os-services/999", headers=admin()).json["itemNotFound"]["message"] == (
        "Service 999 not found.")
    assert api.delete("/v2.1/os-services/52e5a99e", headers=admin("2.53")).json["badRequest"]["message"] == (
        "Invalid uuid 52e5a99e")
    got = api.delete(f"/v2.1/os-services/{other['id']}", headers=admin())
    assert got.status_code == 204
    assert "emulated-node-2" not in [s["host"] for s in _services(api)]
    publish()  # the node is still in the cluster: it registers again, under a new id
    again = _by_host(api, "emulated-node-2", "2.1")
    assert again["id"] > other["id"]


def test_a_node_that_left_stays_listed_down(api, cluster, publish, engine):
    cluster.remove("Node", "emulated-node-3")
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.COMPUTE_SERVICES).values(
            last_seen_up=models.utcnow() - dt.timedelta(seconds=120)))
    publish()
    assert _by_host(api, "emulated-node-3")["state"] == "down"
    assert _by_host(api, "emulated-node-1")["state"] == "up"
    assert compute_services.version_number("v1.31.2") == 1031002
