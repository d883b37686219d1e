"""openstacksdk's server calls against a real ``scripts/serve`` (API, controller, image service).

The connection comes from the var/clouds.yaml scripts/serve wrote: openstacksdk authenticates at the
noauth2 identity answer and takes compute and image from the catalog. A watcher polls the server
over plain HTTP meanwhile, so the test sees the states the server passes through.
"""

from __future__ import annotations

import pytest

from openkeel_compute.images import local
from tests.clients.watch import Watcher


@pytest.fixture(scope="module")
def conn(stack):
    import openstack.config
    import openstack.connection

    region = openstack.config.OpenStackConfig(config_files=[str(stack.checkout / "var/clouds.yaml")],
                                              load_envvars=False).get_one(cloud="openkeel")
    conn = openstack.connection.Connection(config=region)
    yield conn
    conn.close()


def test_openstacksdk_drives_a_server_through_its_life(stack, conn):
    flavor = conn.compute.create_flavor(name="m1.sdk", ram=512, vcpus=1, disk=1, id="sdk-1")
    image = conn.image.find_image(local.DEFAULT_IMAGE_NAME, ignore_missing=False)  # the catalog's image service
    assert (image.id, image.disk_format, image.status) == (local.DEFAULT_IMAGE_ID, "raw", "active")

    server = conn.compute.create_server(name="sdk-web", flavor_id=flavor.id, image_id=image.id, networks="auto")
    watcher = Watcher(stack).watch(server.id)
    try:
        assert server.status is None or server.status == "BUILD"
        server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60, interval=0.5)
        watcher.wait_for(lambda seen: seen[0] == "ACTIVE")  # the watcher polls on its own: let it see it
        assert watcher.statuses()[:2] == ["BUILD", "ACTIVE"]
        assert server.addresses["pod-network"][0]["addr"].startswith("10.244.")

        assert [s.id for s in conn.compute.servers(name="^sdk-web$")] == [server.id]
        got = conn.compute.get_server(server.id)
        assert (got.name, got.vm_state, got.power_state, got.image.id) == ("sdk-web", "active", 1, image.id)

        conn.compute.update_server(server, name="sdk-db")
        conn.compute.set_server_metadata(server, role="db")
        got = conn.compute.get_server(server.id)
        assert (got.name, got.metadata) == ("sdk-db", {"role": "db"})

        def step(call, transient, final):
            mark = watcher.mark()
            call()
            watcher.passes(mark, transient, final)
            assert conn.compute.get_server(server.id).status == final

        step(lambda: conn.compute.stop_server(server), ("ACTIVE", "powering-off", False), "SHUTOFF")
        step(lambda: conn.compute.start_server(server), ("SHUTOFF", "powering-on", False), "ACTIVE")
        step(lambda: conn.compute.reboot_server(server, "SOFT"), ("REBOOT", "rebooting", False), "ACTIVE")
        step(lambda: conn.compute.reboot_server(server, "HARD"), ("HARD_REBOOT", "rebooting_hard", False), "ACTIVE")
        step(lambda: conn.compute.pause_server(server), ("ACTIVE", "pausing", False), "PAUSED")
        step(lambda: conn.compute.unpause_server(server), ("PAUSED", "unpausing", False), "ACTIVE")

        conn.compute.lock_server(server, locked_reason="maintenance")
        got = conn.compute.get_server(server.id)
        assert (got.is_locked, got.locked_reason) == (True, "maintenance")
        conn.compute.unlock_server(server)
        assert conn.compute.get_server(server.id).is_locked is False

        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, wait=60, interval=0.2)
        watcher.wait_for(lambda seen: seen[0] == "404")
        assert ("ACTIVE", "deleting", False) in watcher.seen, watcher.seen
        assert conn.compute.find_server(server.id) is None
    finally:
        watcher.stop()
    actions = sorted(a.action for a in conn.compute.server_actions(server.id))
    assert actions == sorted(["create", "stop", "start", "reboot", "reboot", "pause", "unpause", "lock", "unlock",
                              "delete"]), actions
    conn.compute.delete_flavor(flavor)
