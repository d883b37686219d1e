"""osc-placement against the embedded Placement as scripts/serve sets it up: the noauth2 identity answer's
catalog names Placement, so ``openstack resource provider list``, ``resource provider usage show`` and
``resource provider allocation show`` work with scripts/serve's clouds.yaml, as they do against Nova's Placement."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import uuid

import pytest

from openkeel_compute.controller import providers
from openkeel_compute.emulator.server import node
from openkeel_compute.placement import embedded
from openkeel_compute.placement.client import PlacementClient
from tests.clients.conftest import Server

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"
OPENSTACK = pathlib.Path(sys.executable).parent / "openstack"


@pytest.fixture
def api(tmp_path, placement_service):
    if not OPENSTACK.exists():
        pytest.skip(f"{OPENSTACK} is absent: install the 'cli' extra")
    pytest.importorskip("osc_placement", reason="osc-placement is not installed (the 'cli' extra)")
    server = Server(tmp_path)
    server.conf.write_text(server.conf.read_text() + embedded.config_lines(placement_service))
    server.start()
    clouds = tmp_path / "clouds.yaml"
    sys.path.insert(0, str(SCRIPTS))
    try:
        import _clouds_yaml

        _clouds_yaml.main([str(clouds), "--config-file", str(server.conf), "--port", str(server.port)])
    finally:
        sys.path.remove(str(SCRIPTS))
    try:
        yield clouds
    finally:
        server.stop()


def _openstack(clouds, *args):
    env = {"OS_CLIENT_CONFIG_FILE": str(clouds), "OS_CLOUD": "openkeel", "PATH": "/usr/bin:/bin",
           "HOME": str(clouds.parent), "PYTHONWARNINGS": "ignore"}
    got = subprocess.run([str(OPENSTACK), *args, "-f", "json"], check=False, capture_output=True, text=True,
                         env=env, timeout=120)
    assert got.returncode == 0, f"openstack {' '.join(args)}:\n{got.stdout}\n{got.stderr}"
    return json.loads(got.stdout)


def test_resource_providers_usages_and_allocations(api, placement_service):
    placement = PlacementClient.for_endpoint(placement_service, embedded.TOKEN)
    name = f"node-{uuid.uuid4().hex[:8]}"
    providers.sync(placement, [node(name, cpu="8", memory="16Gi", disk="100Gi")])
    rp = providers.provider_uuid(name)
    server = str(uuid.uuid4())
    placement.put_allocations(server, {rp: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}, project_id="demo",
                              user_id="demo", consumer_generation=None)
    try:
        listed = _openstack(api, "resource", "provider", "list", "--name", name)
        assert [(p["uuid"], p["name"]) for p in listed] == [(rp, name)]
        # a node's provider is a root of its own, as a Nova compute node's is
        assert (listed[0]["root_provider_uuid"], listed[0]["parent_provider_uuid"]) == (rp, None)
        usage = {u["resource_class"]: u["usage"] for u in _openstack(api, "resource", "provider", "usage", "show", rp)}
        assert usage == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}
        shown = _openstack(api, "resource", "provider", "allocation", "show", server)
        assert [(a["resource_provider"], a["resources"]) for a in shown] == [
            (rp, {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10})]
        inventory = {i["resource_class"]: i for i in _openstack(api, "resource", "provider", "inventory", "list", rp)}
        assert inventory["VCPU"]["total"] == 8 and inventory["VCPU"]["allocation_ratio"] == 4.0
        assert inventory["MEMORY_MB"]["reserved"] == 512
    finally:
        placement.delete_allocations(server)
        placement.delete_provider(rp)
