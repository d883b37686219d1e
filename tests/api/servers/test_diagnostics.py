"""GET /servers/{id}/diagnostics and /topology: Nova 34.0.0's versions, policies, query rules and 409s (recorded
from its servers API), and what OpenKeel knows of the server's VMI in the 2.48 format."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import diagnostics, flavor_copy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers import oracle_state as oracle

SERVER = oracle.SERVER_A
DIAG = f"/v2.1/servers/{SERVER}/diagnostics"
TOPO = f"/v2.1/servers/{SERVER}/topology"


def _h(version: str, token: str = "admin:admin") -> dict:
    return {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"}


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


def _set(engine, **values):
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER).values(values))


def test_diagnostics_in_the_standard_format_from_2_48(client, engine):
    got = client.get(DIAG, headers=_h("2.48"))
    assert got.status_code == 200, got.text
    body = got.json
    assert set(body) == {"state", "driver", "hypervisor", "hypervisor_os", "uptime", "config_drive", "num_cpus",
                         "num_nics", "num_disks", "disk_details", "cpu_details", "nic_details", "memory_details"}
    assert (body["state"], body["driver"], body["hypervisor"]) == ("running", "libvirt", "kvm")
    assert body["num_cpus"] == len(body["cpu_details"]) == 1
    macs = [a["OS-EXT-IPS-MAC:mac_addr"] for addresses in oracle.ADDRESSES.values() for a in addresses]
    assert [n["mac_address"] for n in body["nic_details"]] == list(dict.fromkeys(macs))
    assert body["num_nics"] == len(body["nic_details"])
    assert body["memory_details"] == {"maximum": 512, "used": None}
    assert isinstance(body["uptime"], int) and body["uptime"] > 0
    assert client.get(DIAG, headers=_h("2.47")).json == {"memory": 512 * 1024}


def test_diagnostics_policy_query_and_conflicts_as_nova(client, engine):
    got = client.get(DIAG, headers=_h("2.48", "demo:demo"))
    assert (got.status_code, got.json) == (403, {"forbidden": {"code": 403, "message": (
        "Policy doesn't allow os_compute_api:os-server-diagnostics to be performed.")}})
    got = client.get(DIAG, headers=_h("2.48", "other:other"))
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": f"Instance {SERVER} could not be found."}})
    assert client.get(DIAG + "?x=1", headers=_h("2.101")).status_code == 200
    got = client.get(DIAG + "?x=1", headers=_h("2.102"))
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400, "message": "Additional properties are not allowed ('x' was unexpected)"}})
    _set(engine, power_state=4, vm_state="stopped")
    got = client.get(DIAG, headers=_h("2.48"))
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {"code": 409, "message": (
        f"Cannot 'get_diagnostics' instance {SERVER} while it is in power state shutdown")}})
    _set(engine, host=None)
    got = client.get(DIAG, headers=_h("2.1"))
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {
        "code": 409, "message": f"Instance {SERVER} is not ready"}})


def test_topology_from_2_78_empty_without_numa_as_nova(client, engine):
    assert client.get(TOPO, headers=_h("2.77", "demo:demo")).status_code == 404
    for token in ("demo:demo", "admin:admin"):
        got = client.get(TOPO, headers=_h("2.78", token))
        assert (got.status_code, got.json) == (200, {"nodes": [], "pagesize_kb": None})
    got = client.get(TOPO + "?x=1", headers=_h("2.102", "demo:demo"))
    assert got.status_code == 400
    got = client.get(TOPO, headers={**_h("2.78", "other:other")})
    assert got.status_code == 404


def test_topology_of_a_numa_flavor_with_host_details_for_admins(client, engine):
    with db_api.transaction(engine) as conn:
        flavor = catalog.create(conn, name="numa", memory_mb=1024, vcpus=4, root_gb=1, flavorid="numa")
        copy = flavor_copy.primitive(flavor, {"hw:numa_nodes": "2", "hw:mem_page_size": "large"})
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER).values(
            flavor=flavor_copy.dumps(copy), vcpus=4, memory_mb=1024))
    member = client.get(TOPO, headers=_h("2.78", "demo:demo")).json
    assert member == {"nodes": [{"vcpu_set": [0, 1], "siblings": [], "memory_mb": 512},
                                {"vcpu_set": [2, 3], "siblings": [], "memory_mb": 512}], "pagesize_kb": 2048}
    admin = client.get(TOPO, headers=_h("2.78")).json
    assert [(n["host_node"], n["cpu_pinning"]) for n in admin["nodes"]] == [(0, {}), (1, {})]


def test_page_sizes():
    assert [diagnostics._page_size_kb(v) for v in ("small", "large", "any", "2MB", "1GB", "2048", None, "x")] == [
        4, 2048, 4, 2048, 1048576, 2048, None, None]
    assert json.dumps(diagnostics.legacy({"memory_mb": 2})) == '{"memory": 2048}'
