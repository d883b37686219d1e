"""The openstack CLI's move, image and rescue commands against one real ``scripts/serve`` with three emulated
nodes: server create --hint group= (anti-affinity), hypervisor stats show, server migrate (cold) and
migration confirm, server migrate --live-migration --host, server migration list/show/abort/force complete,
compute service set --down and server evacuate, server image create, server backup create, server
shelve/unshelve --host, server rescue/unrescue. Each command's effect is checked over plain HTTP.

A live migration is held in progress by cordoning its target node on the built-in cluster (the target pod
stays Unschedulable): it stays ``preparing`` while the CLI shows, force-completes and aborts it. The commands
that must reach it in time run in one interactive CLI session, so no client start-up stands between them. A
running one is held by the cluster's ``migration-stall`` fault (the pre-copy runs until KubeVirt's completion
timeout) while the CLI force-completes, then aborts it.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request

import pytest

from openkeel_compute.images import local
from tests.clients.test_servers_cli import CLI_TIMEOUT, Cli
from tests.scripts.checkout import free_port

NODES = ("emulated-node-1", "emulated-node-2", "emulated-node-3")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from tests.scripts.stack import Stack

    home = tmp_path_factory.mktemp("moves-stack")
    conf = home / "three-nodes.conf"
    # a forced-down service is down at once; a node's heartbeat every second
    conf.write_text("[DEFAULT]\nreport_interval = 1\nservice_down_time = 5\n[controller]\nemulator_nodes = 3\n")
    emulator = free_port()
    stack = Stack(home, "--config-file", str(conf), "--emulator-port", str(emulator)).start()
    stack.emulator = f"http://127.0.0.1:{emulator}"
    try:
        yield stack
    finally:
        stack.stop()


class SessionCli(Cli):
    def session(self, *commands: str) -> tuple[str, str]:
        """Several commands in one interactive CLI session (one client start-up): its stdout and stderr."""
        got = subprocess.run([self.exe], check=False, input="\n".join(commands) + "\n", env=self.env,
                             cwd=self.cwd, capture_output=True, text=True, timeout=CLI_TIMEOUT)
        return got.stdout, got.stderr


@pytest.fixture(scope="module")
def cli(stack):
    cli = SessionCli(stack)
    if not (stack.checkout / ".venv" / "bin" / "openstack").exists():
        pytest.skip("the openstack client is not installed: install the 'cli' extra (scripts/test does)")
    cli.ok("flavor", "create", "--ram", "512", "--vcpus", "1", "--disk", "1", "--id", "mv-1", "m1.mv")
    return cli


def _server(stack, name: str) -> dict:
    status, body = stack.call("GET", f"/v2.1/servers?name=^{name}$")
    assert status == 200 and len(body["servers"]) == 1, body
    return stack.call("GET", f"/v2.1/servers/{body['servers'][0]['id']}")[1]["server"]


def _settled(stack, server_id: str, want: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        got = stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]
        if got["status"] == want and got["OS-EXT-STS:task_state"] is None:
            return got
        assert time.monotonic() < deadline, f"{server_id} not {want} in {timeout} s: {got['status']} " \
                                            f"{got['OS-EXT-STS:task_state']}"
        time.sleep(0.3)


def _migrations(stack, server_id: str) -> list[dict]:
    status, body = stack.call("GET", f"/v2.1/os-migrations?instance_uuid={server_id}")
    assert status == 200, body
    return sorted(body["migrations"], key=lambda m: m["id"])


def _evacuations_completed(stack, server_id: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while any(m["migration_type"] == "evacuation" and m["status"] not in ("completed", "error", "failed")
              for m in _migrations(stack, server_id)) and time.monotonic() < deadline:
        time.sleep(0.3)


def _cordon(stack, node: str, unschedulable: bool) -> None:
    body = json.dumps({"spec": {"unschedulable": unschedulable}}).encode()
    req = urllib.request.Request(f"{stack.emulator}/api/v1/nodes/{node}", data=body, method="PATCH",
                                 headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200


@pytest.fixture(scope="module")
def pair(stack, cli):
    """Two servers of one anti-affinity group, booted with ``server create --hint group=<id>``."""
    group = cli.ok("server", "group", "create", "--policy", "anti-affinity", "mv-group", "-f", "json")
    shown = {}
    for name in ("mv-a", "mv-b"):
        shown[name] = cli.ok("server", "create", "--flavor", "m1.mv", "--image", local.DEFAULT_IMAGE_NAME, "--nic",
                             "none", "--hint", f"group={group['id']}", "--wait", "-f", "json", name)
    return group, shown


def test_anti_affinity_hint_places_the_pair_on_two_nodes(stack, cli, pair):
    group, shown = pair
    hosts = {name: s["OS-EXT-SRV-ATTR:host"] for name, s in shown.items()}
    assert len(set(hosts.values())) == 2 and set(hosts.values()) <= set(NODES), hosts
    for name, created in shown.items():
        api = _server(stack, name)
        assert (created["id"], created["status"], created["OS-EXT-SRV-ATTR:host"]) == (
            api["id"], "ACTIVE", api["OS-EXT-SRV-ATTR:host"])
    members = cli.ok("server", "group", "show", group["id"], "-f", "json")["members"]
    assert sorted(members) == sorted(s["id"] for s in shown.values())


def test_hypervisor_stats_show_is_the_21_statistics(stack, cli, pair):
    """OSC asks /os-hypervisors/statistics at 2.1 whatever its compute version (Nova removed it at 2.88)."""
    shown = cli.ok("hypervisor", "stats", "show", "-f", "json")
    status, body = stack.call("GET", "/v2.1/os-hypervisors/statistics", version="2.1")
    assert status == 200
    assert shown == body["hypervisor_statistics"]
    assert (shown["count"], shown["running_vms"]) == (3, 2)
    assert stack.call("GET", "/v2.1/os-hypervisors/statistics", version="2.88")[0] == 404


def test_cold_migrate_then_confirm(stack, cli, pair):
    _, shown = pair
    before = shown["mv-a"]
    cli.ok("server", "migrate", "--wait", "mv-a")  # waits for VERIFY_RESIZE
    got = _server(stack, "mv-a")
    assert got["status"] == "VERIFY_RESIZE"
    # anti-affinity holds on a move: neither its old node nor its peer's
    assert got["OS-EXT-SRV-ATTR:host"] not in (before["OS-EXT-SRV-ATTR:host"],
                                               shown["mv-b"]["OS-EXT-SRV-ATTR:host"])
    listed = cli.ok("server", "migration", "list", "--server", "mv-a", "-f", "json")
    api = _migrations(stack, before["id"])
    assert [(m["Id"], m["UUID"], m["Status"], m["Type"], m["Source Compute"], m["Dest Compute"]) for m in listed] \
        == [(m["id"], m["uuid"], m["status"], m["migration_type"], m["source_compute"], m["dest_compute"])
            for m in api] == [(api[0]["id"], api[0]["uuid"], "finished", "migration",
                               before["OS-EXT-SRV-ATTR:host"], got["OS-EXT-SRV-ATTR:host"])]
    cli.ok("server", "migration", "confirm", "mv-a")
    confirmed = _settled(stack, before["id"], "ACTIVE")
    assert confirmed["OS-EXT-SRV-ATTR:host"] == got["OS-EXT-SRV-ATTR:host"]
    assert _migrations(stack, before["id"])[-1]["status"] == "confirmed"


def test_live_migrate_to_a_host(stack, cli, pair):
    server = _server(stack, "mv-a")
    peer = _server(stack, "mv-b")
    free = next(n for n in NODES if n not in (server["OS-EXT-SRV-ATTR:host"], peer["OS-EXT-SRV-ATTR:host"]))
    cli.ok("server", "migrate", "--live-migration", "--host", free, "--wait", "mv-b")
    moved = _settled(stack, peer["id"], "ACTIVE")
    assert moved["OS-EXT-SRV-ATTR:host"] == free
    (live,) = [m for m in _migrations(stack, peer["id"]) if m["migration_type"] == "live-migration"]
    assert (live["status"], live["source_compute"], live["dest_compute"]) == (
        "completed", peer["OS-EXT-SRV-ATTR:host"], free)
    listed = cli.ok("server", "migration", "list", "--server", "mv-b", "--type", "live-migration", "-f", "json")
    assert [(m["Id"], m["Status"], m["Dest Compute"]) for m in listed] == [(live["id"], "completed", free)]
    # a finished migration: the in-progress one the CLI looks for by UUID is gone, as on Nova
    gone = cli.run("server", "migration", "show", "mv-b", live["uuid"])
    assert gone.returncode == 1
    assert f"In-progress live migration {live['uuid']} is not found for server {peer['id']}" in gone.stderr
    # by its number: python-openstackclient 10.5 passes server and migration to the SDK the other way round
    # (GET /servers/<migration id>/migrations/<server id>), which any Nova answers 404
    swapped = cli.run("server", "migration", "show", "mv-b", str(live["id"]))
    assert swapped.returncode == 1 and f"Instance {live['id']} could not be found" in swapped.stderr, swapped.stderr
    refused = cli.run("server", "migration", "abort", "mv-b", str(live["id"]))
    assert refused.returncode == 1
    assert f"Instance {peer['id']} is in an invalid state for 'abort live migration'" in refused.stderr, \
        refused.stderr


def test_a_live_migration_in_progress_shown_force_completed_and_aborted(stack, cli, pair):
    server = _server(stack, "mv-a")
    peer = _server(stack, "mv-b")
    # the node neither is on, cordoned: the target pod cannot be scheduled, the migration stays preparing
    target = next(n for n in NODES if n not in (server["OS-EXT-SRV-ATTR:host"], peer["OS-EXT-SRV-ATTR:host"]))
    _cordon(stack, target, True)
    try:
        out, err = cli.session(f"server migrate --live-migration --host {target} mv-b")
        assert err.strip() == "", err
        deadline = time.monotonic() + 120
        while not (live := [m for m in _migrations(stack, peer["id"]) if m["status"] == "preparing"]):
            assert time.monotonic() < deadline, _migrations(stack, peer["id"])
            time.sleep(0.2)
        (mig,) = live
        out, err = cli.session(f"server migration show mv-b {mig['uuid']} -f json",
                               f"server migration force complete mv-b {mig['uuid']}",
                               f"server migration abort mv-b {mig['uuid']}")
    finally:
        _cordon(stack, target, False)
    shown = json.loads(out)
    assert (shown["ID"], shown["UUID"], shown["Status"], shown["Source Compute"], shown["Dest Compute"]) == (
        mig["id"], mig["uuid"], "preparing", peer["OS-EXT-SRV-ATTR:host"], target)
    # force complete: only a running migration can be (Nova's 400), then the abort went through
    assert (f"Migration {mig['id']} state of instance {peer['id']} is preparing. Cannot force complete while the "
            "migration is in this state.") in err, err
    assert err.count("Exception") == 1, err
    back = _settled(stack, peer["id"], "ACTIVE")
    assert back["OS-EXT-SRV-ATTR:host"] == peer["OS-EXT-SRV-ATTR:host"]
    assert [m["status"] for m in _migrations(stack, peer["id"]) if m["id"] == mig["id"]] == ["cancelled"]
    listed = cli.ok("server", "migration", "list", "--server", "mv-b", "--status", "cancelled", "-f", "json")
    assert [m["Id"] for m in listed] == [mig["id"]]


POLICIES = "/apis/migrations.kubevirt.io/v1alpha1/migrationpolicies"


def _emulator(stack, method: str, path: str, body: dict | None = None) -> None:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{stack.emulator}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status in (200, 201, 202, 204)


def _stall_migrations(stack, on: bool) -> None:
    """The built-in cluster's ``migration-stall`` fault: a live migration does not converge, its pre-copy runs
    until KubeVirt's completion timeout (completionTimeoutPerGiB × the guest memory in GiB), then is aborted;
    an operator's MigrationPolicy of 3000 s a GiB keeps it running long enough (75 s for this flavor at
    scripts/serve's pace) for the CLI. Off: the policy deleted, all faults cleared."""
    if on:
        _emulator(stack, "POST", POLICIES, {"apiVersion": "migrations.kubevirt.io/v1alpha1",
                                            "kind": "MigrationPolicy", "metadata": {"name": "mv-slow"},
                                            "spec": {"completionTimeoutPerGiB": 3000, "selectors": {}}})
        _emulator(stack, "POST", "/emulator/v1/faults", {"kind": "migration-stall"})
    else:
        _emulator(stack, "DELETE", "/emulator/v1/faults")
        _emulator(stack, "DELETE", f"{POLICIES}/mv-slow")


def test_a_running_live_migration_force_completed_then_aborted(stack, cli, pair):
    """force complete on a running migration: Nova's 202 with a driver that cannot (KubeVirt has no call that
    makes a running pre-copy converge), the action recorded with its compute event failed and the migration
    still running; then abort: 202, KubeVirt's cancel, the migration ``cancelled`` and the server ACTIVE on its
    source, as Nova's libvirt driver ends a cancelled job."""
    server = _server(stack, "mv-a")
    peer = _server(stack, "mv-b")
    target = next(n for n in NODES if n not in (server["OS-EXT-SRV-ATTR:host"], peer["OS-EXT-SRV-ATTR:host"]))
    _stall_migrations(stack, True)
    try:
        cli.ok("server", "migrate", "--live-migration", "--host", target, "mv-b")
        deadline = time.monotonic() + 120  # a loaded CI machine (2 cores)
        while not (live := [m for m in _migrations(stack, peer["id"]) if m["status"] == "running"]):
            assert time.monotonic() < deadline, _migrations(stack, peer["id"])
            time.sleep(0.2)
        (mig,) = live
        forced = cli.run("server", "migration", "force", "complete", "mv-b", mig["uuid"])
        assert (forced.returncode, forced.stderr.strip()) == (0, ""), forced.stderr
        status, body = stack.call("GET", f"/v2.1/servers/{peer['id']}/migrations/{mig['id']}", version="2.80")
        assert status == 200 and body["migration"]["status"] == "running", body
        assert _server(stack, "mv-b")["OS-EXT-STS:task_state"] == "migrating"
        aborted = cli.run("server", "migration", "abort", "mv-b", mig["uuid"])
        assert (aborted.returncode, aborted.stderr.strip()) == (0, ""), aborted.stderr
        back = _settled(stack, peer["id"], "ACTIVE")
    finally:
        _stall_migrations(stack, False)
    assert back["OS-EXT-SRV-ATTR:host"] == peer["OS-EXT-SRV-ATTR:host"]
    assert [m["status"] for m in _migrations(stack, peer["id"]) if m["id"] == mig["id"]] == ["cancelled"]
    # the server no longer migrating: Nova's 409 on its task state, before the migration is looked at (by its
    # number: by UUID the CLI itself looks for an in-progress migration first); task_state None, so Nova's
    # message is the one without the state (raise_http_conflict_for_instance_invalid_state)
    again = cli.run("server", "migration", "force", "complete", "mv-b", str(mig["id"]))
    assert again.returncode == 1
    assert "ConflictException: 409" in again.stderr, again.stderr
    assert f"Instance {peer['id']} is in an invalid state for 'force_complete'" in again.stderr, again.stderr
    actions = stack.call("GET", f"/v2.1/servers/{peer['id']}/os-instance-actions")[1]["instanceActions"]
    forced_action = next(a for a in actions if a["action"] == "live_migration_force_complete")
    status, body = stack.call("GET", f"/v2.1/servers/{peer['id']}/os-instance-actions/{forced_action['request_id']}",
                              version="2.51")
    assert status == 200
    assert [(e["event"], e["result"]) for e in body["instanceAction"]["events"]] == [
        ("compute_live_migration_force_complete", "Error")]
    assert "live_migration_cancel" in {a["action"] for a in actions}


def test_evacuate_from_a_node_forced_down(stack, cli, pair):
    server = _server(stack, "mv-b")
    source = server["OS-EXT-SRV-ATTR:host"]
    other = _server(stack, "mv-a")["OS-EXT-SRV-ATTR:host"]
    target = next(n for n in NODES if n not in (source, other))
    cli.ok("compute", "service", "set", "--down", source, "nova-compute")
    try:
        (service,) = cli.ok("compute", "service", "list", "--host", source, "--long", "-f", "json")
        assert (service["State"], service["Forced Down"]) == ("down", True), service
        # no --wait: the CLI waits for ACTIVE, but from 2.95 (the CLI asks 2.104) an evacuated server ends
        # stopped on its new node, as on Nova
        shown = cli.ok("server", "evacuate", "--host", target, "-f", "json", "mv-b")
        moved = _settled(stack, server["id"], "SHUTOFF")
    finally:
        # as on Nova, the service is forced up only once no evacuation from it is left `done` (the node's next
        # heartbeat completes them): an operator waits for that, and so does this test, also after a failure
        # above, so that the tests after it find the node up
        _evacuations_completed(stack, server["id"])
        cli.ok("compute", "service", "set", "--up", source, "nova-compute")
    assert shown["id"] == server["id"] and shown["status"] in ("REBUILD", "SHUTOFF"), shown["status"]
    assert (moved["OS-EXT-SRV-ATTR:host"], moved["OS-EXT-STS:vm_state"]) == (target, "stopped")
    cli.ok("server", "start", "mv-b")
    assert _settled(stack, server["id"], "ACTIVE")["OS-EXT-SRV-ATTR:host"] == target
    # "done", then "completed" once the source's service is back and has let go of the server (Nova's
    # _destroy_evacuated_instances when the source compute starts again)
    evacuation = [m for m in _migrations(stack, server["id"]) if m["migration_type"] == "evacuation"]
    assert [(m["status"], m["source_compute"], m["dest_compute"]) for m in evacuation] == [
        ("completed", source, target)]


def test_image_and_backup_of_a_server(stack, cli, pair):
    server = _server(stack, "mv-a")
    image = cli.ok("server", "image", "create", "--name", "mv-snap", "--wait", "-f", "json", "mv-a")
    status, body = stack.call("GET", f"/v2.1/images/{image['id']}", version="2.35")  # the proxy (to 2.35)
    assert status == 200 and body["image"]["status"] == "ACTIVE", body
    assert (image["name"], image["status"]) == ("mv-snap", "active")
    assert body["image"]["metadata"]["instance_uuid"] == server["id"]
    backup = cli.ok("server", "backup", "create", "--name", "mv-bk", "--type", "daily", "--rotate", "1", "--wait",
                    "-f", "json", "mv-a")
    shown = cli.ok("image", "show", "-f", "json", backup["id"])
    assert (shown["name"], shown["status"]) == ("mv-bk", "active")
    assert (shown["properties"]["backup_type"], shown["properties"]["image_type"]) == ("daily", "backup")
    _settled(stack, server["id"], "ACTIVE")
    actions = stack.call("GET", f"/v2.1/servers/{server['id']}/os-instance-actions")[1]["instanceActions"]
    assert {"createImage", "createBackup"} <= {a["action"] for a in actions}


def test_shelve_then_unshelve_to_a_host(stack, cli, pair):
    server = _server(stack, "mv-a")
    peer = _server(stack, "mv-b")["OS-EXT-SRV-ATTR:host"]
    target = next(n for n in NODES if n not in (server["OS-EXT-SRV-ATTR:host"], peer))
    cli.ok("server", "shelve", "--wait", "mv-a")
    shelved = _settled(stack, server["id"], "SHELVED_OFFLOADED")
    assert shelved["OS-EXT-SRV-ATTR:host"] is None
    cli.ok("server", "unshelve", "--availability-zone", "nova", "--host", target, "--wait", "mv-a")
    back = _settled(stack, server["id"], "ACTIVE")
    assert (back["OS-EXT-SRV-ATTR:host"], back["OS-EXT-AZ:availability_zone"]) == (target, "nova")
    shown = cli.ok("server", "show", "-f", "json", "mv-a")
    assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", target)


def test_rescue_then_unrescue(stack, cli, pair):
    server = _server(stack, "mv-a")
    cli.ok("server", "rescue", "mv-a")
    rescued = _settled(stack, server["id"], "RESCUE")
    assert rescued["OS-EXT-STS:vm_state"] == "rescued"
    assert cli.ok("server", "show", "-f", "json", "mv-a")["status"] == "RESCUE"
    cli.ok("server", "unrescue", "mv-a")
    back = _settled(stack, server["id"], "ACTIVE")
    assert back["OS-EXT-SRV-ATTR:host"] == server["OS-EXT-SRV-ATTR:host"]
    actions = stack.call("GET", f"/v2.1/servers/{server['id']}/os-instance-actions")[1]["instanceActions"]
    assert {"rescue", "unrescue"} <= {a["action"] for a in actions}
