"""The openstack CLI's server volume commands against a real ``scripts/serve`` (API, controller, image
service) whose [cinder] is the in-memory Cinder of tests/volume: ``server add volume``, ``server volume
list``, ``server volume update`` and ``server remove volume``, as a user types them.

The CLI finds the volume by name in the block storage service (the noauth2 identity answer's catalog names
the ``[cinder] endpoint_template``) and then calls the compute API; the controller hotplugs the disk and completes
Cinder's attachment, and unplugs it and deletes the attachment on the removal.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from openkeel_compute.images import local
from tests.volume.fake_cinder import FakeCinder

CLI_TIMEOUT = 120


@pytest.fixture(scope="module")
def cinder():
    fake = FakeCinder()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def volume_stack(tmp_path_factory, cinder):
    from tests.scripts.stack import Stack

    home = tmp_path_factory.mktemp("volume-stack")
    conf = home / "cinder.conf"
    conf.write_text("[cinder]\nauth_type = admin_token\n"
                    f"endpoint = {cinder.url}\ntoken = cinder-admin\n"
                    f"endpoint_template = {cinder.url}/v3/%(project_id)s\n")
    stack = Stack(home, "--config-file", str(conf)).start()
    try:
        yield stack
    finally:
        stack.stop()


class Cli:
    """scripts/openstack with the clouds.yaml scripts/serve wrote (its token's catalog names Cinder)."""

    def __init__(self, stack):
        self.env = dict(stack.env, OS_CLOUD="openkeel")
        self.exe = str(stack.checkout / "scripts/openstack")
        self.cwd = stack.checkout

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.exe, *args], check=False, env=self.env, cwd=self.cwd, capture_output=True,
                              text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)

    def ok(self, *args: str):
        got = self.run(*args)
        assert got.returncode == 0, f"openstack {' '.join(args)} -> {got.returncode}\n{got.stdout}\n{got.stderr}"
        return json.loads(got.stdout) if "-f" in args and "json" in args else got.stdout


@pytest.fixture(scope="module")
def cli(volume_stack):
    cli = Cli(volume_stack)
    cli.ok("flavor", "create", "--ram", "512", "--vcpus", "1", "--disk", "1", "--id", "vol-1", "m1.vol")
    return cli


def _wait(check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.1)


def test_the_cli_adds_lists_updates_and_removes_a_volume(volume_stack, cli, cinder):
    created = cli.ok("server", "create", "--flavor", "m1.vol", "--image", local.DEFAULT_IMAGE_NAME, "--wait",
                     "-f", "json", "cli-vol")
    server_id = created["id"]
    volume = cinder.volume(size=2, name="cli-data")
    try:
        # found by name in the block storage service; the tag needs 2.49, the flag 2.79 (the cloud asks 2.104)
        cli.ok("server", "add", "volume", "cli-vol", "cli-data", "--tag", "data", "--enable-delete-on-termination")
        assert cinder.volumes[volume["id"]]["status"] in ("reserved", "attaching", "in-use")
        _wait(lambda: cinder.volumes[volume["id"]]["status"] == "in-use")  # the controller hotplugged it
        status, body = volume_stack.call("GET", f"/v2.1/servers/{server_id}/os-volume_attachments/{volume['id']}",
                                         version="2.89")
        assert status == 200 and body["volumeAttachment"]["tag"] == "data"
        assert body["volumeAttachment"]["delete_on_termination"] is True

        listed = cli.ok("server", "volume", "list", "cli-vol", "-f", "json")
        assert [(v["Volume ID"], v["Server ID"], v["Device"], v["Tag"], v["Delete On Termination?"])
                for v in listed] == [(volume["id"], server_id, "/dev/vdb", "data", True)]

        # 2.85: delete_on_termination changed in place
        cli.ok("server", "volume", "update", "cli-vol", volume["id"], "--preserve-on-termination")
        listed = cli.ok("server", "volume", "list", "cli-vol", "-f", "json")
        assert [v["Delete On Termination?"] for v in listed] == [False]

        cli.ok("server", "remove", "volume", "cli-vol", "cli-data")
        _wait(lambda: cinder.volumes[volume["id"]]["status"] == "available")  # unplugged, attachment deleted
        assert not [a for a in cinder.attachments.values() if a["volume_id"] == volume["id"]]
        assert cli.ok("server", "volume", "list", "cli-vol", "-f", "json") == []

        # a volume the block storage service does not have: the CLI says so, nothing is called
        got = cli.run("server", "add", "volume", "cli-vol", "no-such-volume")
        assert got.returncode == 1 and "no-such-volume" in got.stderr
    finally:
        cli.run("server", "delete", "--wait", "cli-vol")
