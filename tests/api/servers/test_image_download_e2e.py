"""A server whose image cannot be downloaded when it is spawned (deleted from the image service after the boot
was accepted): the built-in cluster's import reads the image as CDI's importer does, fails and is restarted,
and the build ends as Nova's does: ERROR with the conductor's fault once no alternate host is left, the claim
given back, nothing of the server left in the cluster. An alternate node is tried first (the disk imported
again), as Nova reschedules to an alternate host."""

from __future__ import annotations

from tests.api.servers.faulty_images import of_server
from tests.conftest import admin
from tests.server_world import DEMO, IMAGE, settled, until


def _boot(client, service):
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.e2e", "ram": 512, "vcpus": 1, "disk": 1, "id": "e2e"}})
    assert flavor.status_code in (200, 409), flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "gone-image", "imageRef": IMAGE, "flavorRef": "e2e", "networks": "none"}})
    assert got.status_code == 202, got.text
    service.delete(IMAGE)  # deleted once the boot was accepted: the spawn cannot download it
    return got.json["server"]["id"]


def _consumers(placement, uuid):
    return [p for p in placement.providers() if uuid in placement.provider_allocations(p["uuid"])]


def test_an_image_deleted_before_the_spawn_fails_the_build_with_novas_fault(tmp_path, db_engine,
                                                                             placement_service):
    from tests.api.servers.faulty_images import fault_world

    with fault_world(tmp_path, db_engine, placement_service, read_images=True) as (
            client, controller, cluster, service, _tmp, placement):
        uuid = _boot(client, service)
        got = until(client, controller, uuid, settled("ERROR"), timeout=60).json["server"]
        assert got["status"] == "ERROR", got
        assert got["fault"]["code"] == 500
        assert got["fault"]["message"] == (
            "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for "
            f"instance {uuid}.")
        shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
        assert shown["OS-EXT-SRV-ATTR:host"] is None and shown["OS-EXT-SRV-ATTR:hypervisor_hostname"] is None
        assert _consumers(placement, uuid) == []  # the claim given back
        for _ in range(20):  # what the delete asked to go is gone at the cluster's next passes
            controller.run_once()
            if not of_server(cluster, uuid):
                break
        assert of_server(cluster, uuid) == {}


def test_an_image_that_cannot_be_downloaded_is_tried_on_an_alternate_node_first(tmp_path, db_engine,
                                                                                 placement_service):
    from tests.api.servers.faulty_images import fault_world

    with fault_world(tmp_path, db_engine, placement_service, nodes=2, read_images=True) as (
            client, controller, cluster, service, _tmp, placement):
        uuid = _boot(client, service)
        nodes, imports = set(), set()
        got = None
        for _ in range(2000):
            controller.run_once()
            got = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
            if got["OS-EXT-SRV-ATTR:host"]:
                nodes.add(got["OS-EXT-SRV-ATTR:host"])
            imports |= {o["metadata"]["uid"] for o in cluster.objects("DataVolume").values()
                        if o["metadata"]["name"].startswith(uuid)}
            if got["status"] == "ERROR" and got["OS-EXT-STS:task_state"] is None:
                break
        assert got is not None and got["status"] == "ERROR", got
        assert nodes == {"emulated-node-1", "emulated-node-2"}  # the alternate was tried
        assert len(imports) == 2  # the disk imported again there
        assert got["fault"]["message"] == (
            "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for "
            f"instance {uuid}.")
        assert _consumers(placement, uuid) == []
