"""A controller killed with SIGKILL mid-work, again and again: once restarted, every server settles and
nothing is left behind in Placement, the cluster or the database.

The controller runs as its own process (``openkeel-compute controller``, as scripts/serve and a
deployment run it) against the built-in cluster and the embedded Placement; the API app takes the
requests in this process. Builds, deletes, stop/start and resizes with their confirm or revert are
sent in rounds, and the controller is killed a moment after each round's requests (while they are under
way) and started again. Then:

- every server shows a state Nova settles in (ACTIVE, SHUTOFF, VERIFY_RESIZE) with no task;
- Placement holds one allocation per live server with its flavor's amounts, on the cluster's node, and
  nothing else (none of a deleted server, none of a resize's migration after confirm or revert);
- the cluster holds exactly one VM per live server and no object of a deleted server;
- the database holds no pending outbox row and no controller working state of a deleted server, and
  no migration still under way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import sqlalchemy as sa
import yaml

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.emulator import Delays, Emulator
from openkeel_compute.placement import embedded
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import admin, make_conf, placement_overrides, placement_section
from tests.databases import ENGINES, throwaway_database
from tests.server_world import DEMO, IMAGE, image_service, reset_placement
from tests.wsgi_client import Client

SETTLED = {"ACTIVE", "SHUTOFF", "VERIFY_RESIZE"}
FLAVORS = {"kc-small": (512, 1, 1), "kc-big": (1024, 2, 1)}  # ram, vcpus, disk
# The kinds a server's objects come in (its VM and what goes with it).
SERVER_KINDS = ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "VirtualMachineInstancetype",
                "VirtualMachinePreference", "ControllerRevision", "Secret", "PersistentVolumeClaim", "Pod")
V247 = dict(DEMO, **{"OpenStack-API-Version": "compute 2.47"})


class Controller:
    """``openkeel-compute controller`` as a process of its own, killed and started at will."""

    def __init__(self, conf_file: str, extra: str, kubeconfig: str) -> None:
        self.argv = [sys.executable, "-m", "openkeel_compute.cmd.main", "controller", "--config-file", conf_file,
                     "--config-file", extra, "--kubeconfig", kubeconfig]
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - gone with the test
        self.process: subprocess.Popen | None = None
        self.kills = 0
        self.interrupted: list[int] = []

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                                        stdout=subprocess.DEVNULL, stderr=self.log)

    def kill(self) -> None:
        assert self.process is not None and self.process.poll() is None, f"the controller exited:\n{self.tail()}"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.kills += 1

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]


def _server(client: Client, uuid: str) -> dict | None:
    got = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96"))
    if got.status_code == 404:
        return None
    assert got.status_code == 200, got.text
    return got.json["server"]


def _settle(client: Client, controller: Controller, want: dict[str, str | None], timeout: float = 40.0) -> None:
    """Wait until each server shows its wanted status with no task (None: gone)."""
    deadline = time.monotonic() + timeout
    while True:
        assert controller.process.poll() is None, f"the controller exited:\n{controller.tail()}"
        shown = {uuid: _server(client, uuid) for uuid in want}
        seen = {uuid: s and (s["status"], s["OS-EXT-STS:task_state"]) for uuid, s in shown.items()}
        if all(seen[u] == (w and (w, None)) for u, w in want.items()):
            return
        assert time.monotonic() < deadline, f"not settled in {timeout:.0f} s: {seen}\n{controller.tail()}"
        time.sleep(0.1)


def _post(client: Client, path: str, body: dict, headers=DEMO) -> None:
    got = client.post(path, headers=headers, json_body=body)
    assert got.status_code in (200, 202, 204), got.text


def _boot(client: Client, name: str, flavor: str = "kc-small") -> str:
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": name, "imageRef": IMAGE, "flavorRef": flavor, "networks": "auto"}})
    assert got.status_code == 202, got.text
    return got.json["server"]["id"]


def _action(client: Client, uuid: str, body: dict) -> None:
    _post(client, f"/v2.1/servers/{uuid}/action", body, headers=V247)


def _delete(client: Client, uuid: str) -> None:
    got = client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert got.status_code == 204, got.text


def _work(cluster: Emulator) -> int:
    """How many writes the controller has sent to the cluster (its Lease's renewals left out)."""
    return sum(1 for _method, path, _params in list(cluster.store.writes) if "/leases" not in path)


def _kill_and_restart(controller: Controller, cluster: Emulator, client: Client, uuids, writes: int) -> None:
    """Kill the controller once it has sent ``writes`` more writes to the cluster (it is at work, not
    starting) and start another; how many of ``uuids`` had a task under way then is kept."""
    mark, deadline = _work(cluster), time.monotonic() + 30
    while _work(cluster) < mark + writes:
        assert controller.process.poll() is None, f"the controller exited:\n{controller.tail()}"
        assert time.monotonic() < deadline, f"the controller did no work:\n{controller.tail()}"
        time.sleep(0.005)
    shown = [_server(client, uuid) for uuid in uuids]
    controller.kill()
    controller.interrupted.append(sum(1 for s in shown if s and s["OS-EXT-STS:task_state"] is not None))
    controller.start()


def _mentions(obj: dict, uuid: str) -> bool:
    return uuid in json.dumps(obj["metadata"])


def _check_placement(placement: PlacementClient, live: dict[str, str], engine) -> None:
    held: dict[str, dict[str, int]] = {}
    for provider in placement.providers():
        for consumer, resources in placement.provider_allocations(provider["uuid"]).items():
            assert consumer not in held, f"{consumer} holds on two providers"
            held[consumer] = resources
    want = {uuid: dict(zip(("MEMORY_MB", "VCPU", "DISK_GB"), FLAVORS[flavor], strict=True))
            for uuid, flavor in live.items()}
    with db_api.reader(engine) as conn:
        moves = {m.uuid: (m.instance_uuid, m.status) for m in conn.execute(sa.select(
            models.MIGRATIONS.c.uuid, models.MIGRATIONS.c.instance_uuid, models.MIGRATIONS.c.status))}
    assert held == want, {c: (r, moves.get(c, "not a migration")) for c, r in held.items() if want.get(c) != r}


def _check_cluster(cluster: Emulator, live: dict[str, str], deleted: set[str]) -> None:
    vms = [key for key in cluster.objects("VirtualMachine")]
    assert sorted(name for _ns, name in vms) == sorted(live), vms
    for kind in SERVER_KINDS:
        left = [key for key, obj in cluster.objects(kind).items() if any(_mentions(obj, u) for u in deleted)]
        assert left == [], f"{kind} of deleted servers: {left}"


def _check_sizing(cluster: Emulator) -> None:
    """Of what sizes the VMs, only what they use now is left: every ControllerRevision is one a VM's status
    names (none of an old size after a confirm, a revert or a reset), and every server's own instancetype
    and preference (``<uuid>-<digest>``) is the one its VM names."""
    vms = list(cluster.objects("VirtualMachine").values())
    used_revisions, named = set(), set()
    for vm in vms:
        namespace = vm["metadata"]["namespace"]
        for field, ref in (("instancetype", "instancetypeRef"), ("preference", "preferenceRef")):
            revision = ((vm.get("status") or {}).get(ref) or {}).get("controllerRevisionRef") or {}
            if revision.get("name"):
                used_revisions.add((namespace, revision["name"]))
            matcher = (vm["spec"].get(field) or {})
            if matcher.get("name"):
                named.add((namespace, matcher["name"]))
    # (KubeVirt's own revisions of a VM's start, revision-start-vm-<uid>-<n>, are its business)
    revisions = {key for key in cluster.objects("ControllerRevision") if not key[1].startswith("revision-start-vm-")}
    assert revisions - used_revisions == set(), ("ControllerRevisions no VM uses", {
        vm["metadata"]["name"]: (vm["spec"].get("instancetype"), (vm.get("status") or {}).get("instancetypeRef"))
        for vm in vms if any(key[1].startswith(vm["metadata"]["name"]) for key in revisions - used_revisions)})
    for kind in ("VirtualMachineInstancetype", "VirtualMachinePreference"):
        own = {key for key in cluster.objects(kind) if any(key[1].startswith(vm["metadata"]["name"] + "-")
                                                             for vm in vms)}
        assert own - named == set(), f"{kind} copies no VM names"


def _check_database(engine, live: dict[str, str], deleted: set[str]) -> list:
    """No pending outbox row, no working state of a deleted server, no move under way; the working
    state left (instance, key)."""
    with db_api.reader(engine) as conn:
        outbox = conn.execute(sa.select(models.OUTBOX.c.object_id, models.OUTBOX.c.operation).where(
            models.OUTBOX.c.done_at.is_(None))).all()
        working = conn.execute(sa.select(models.INSTANCE_CONTROLLER_STATE.c.instance_uuid,
                                         models.INSTANCE_CONTROLLER_STATE.c.key)).all()
        moves = conn.execute(sa.select(models.MIGRATIONS.c.instance_uuid, models.MIGRATIONS.c.status)).all()
    assert outbox == []
    assert [w for w in working if w.instance_uuid in deleted] == []
    # no move under way: each resize ended confirmed or reverted (or waits for the user, VERIFY_RESIZE: finished)
    # (an administrator's os-resetState out of VERIFY_RESIZE ends it in error, as Nova's periodic check does)
    assert {m.status for m in moves} <= {"confirmed", "reverted", "finished", "error"}, moves
    return working


@contextlib.contextmanager
def _world(engine_name, tmp_path, placement_service, *, nodes: int = 1):
    """The API app in this process, the controller as a process of its own, the built-in cluster with
    ``nodes`` nodes (one: a resize stays on it; more: it moves), the shared embedded Placement emptied
    first, the test flavors. Yields (client, controller, cluster, placement, engine)."""
    policies.reset()
    placement = PlacementClient.for_endpoint(placement_service, embedded.TOKEN)
    reset_placement(placement)  # the embedded Placement is shared by the run's tests: start from empty
    cluster = Emulator(delays=Delays.fast(), tick=0.01, nodes=nodes, read_images=False).start()  # images never served
    with throwaway_database(engine_name, tmp_path) as url, image_service(tmp_path) as glance_url:
        conf = make_conf(tmp_path, database={"connection": url}, glance={"api_servers": glance_url},
                         placement=placement_overrides(placement_service))
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(cluster.kubeconfig()))
        extra = tmp_path / "controller.conf"
        # the Lease is short, so that a restarted controller leads soon
        extra.write_text(f"[DEFAULT]\nallow_resize_to_same_host = {'true' if nodes == 1 else 'false'}\n"
                         "[controller]\nidentity = killed-controller\nlease_duration = 2\n"
                         "lease_renew_interval = 0.2\nmetrics_port = 0\npoll_interval = 0.05\nworkers = 2\n"
                         f"[glance]\napi_servers = {glance_url}\n" + placement_section(placement_service))
        controller = Controller(conf.config_file[0], str(extra), str(kubeconfig))
        client = Client(deploy(conf))
        try:
            for flavorid, (ram, vcpus, disk) in FLAVORS.items():
                _post(client, "/v2.1/flavors", {"flavor": {"name": flavorid, "ram": ram, "vcpus": vcpus,
                                                           "disk": disk, "id": flavorid}}, headers=admin())
            controller.start()
            yield client, controller, cluster, placement, engine
        finally:
            controller.stop()
            cluster.stop()
            db_api.dispose_all()
            policies.reset()


@pytest.mark.parametrize("engine_name", ENGINES)
def test_nothing_leaks_after_a_killed_controller(engine_name, tmp_path, placement_service):
    with _world(engine_name, tmp_path, placement_service) as (client, controller, cluster, placement, engine):
        live: dict[str, str] = {}
        deleted: set[str] = set()

        # 1. builds under way
        for i in range(6):
            live[_boot(client, f"kc-{i}")] = "kc-small"
        s = list(live)
        _kill_and_restart(controller, cluster, client, s, 3)
        _settle(client, controller, dict.fromkeys(live, "ACTIVE"))

        # 2. deletes, a stop and resizes under way
        for uuid in s[:2]:
            _delete(client, uuid)
            live.pop(uuid)
            deleted.add(uuid)
        _action(client, s[2], {"os-stop": None})
        for uuid in s[3:6]:
            _action(client, uuid, {"resize": {"flavorRef": "kc-big"}})
            live[uuid] = "kc-big"
        _kill_and_restart(controller, cluster, client, s, 4)
        _settle(client, controller, {**dict.fromkeys(s[:2]), s[2]: "SHUTOFF",
                                     **dict.fromkeys(s[3:6], "VERIFY_RESIZE")})

        # 3. a confirm, a revert, a start, a delete and more builds under way
        _action(client, s[3], {"confirmResize": None})
        _action(client, s[4], {"revertResize": None})
        live[s[4]] = "kc-small"
        _action(client, s[2], {"os-start": None})
        _delete(client, s[5])
        live.pop(s[5])
        deleted.add(s[5])
        more = [_boot(client, f"kc-more-{i}") for i in range(2)]
        live.update(dict.fromkeys(more, "kc-small"))
        s += more
        _kill_and_restart(controller, cluster, client, s, 2)
        # killed again while the restarted one recovers
        _kill_and_restart(controller, cluster, client, s, 6)
        _settle(client, controller, {**dict.fromkeys(deleted), **dict.fromkeys(live, "ACTIVE")})

        # 4. a resize reverted and one confirmed while the controller is killed twice
        _action(client, more[0], {"resize": {"flavorRef": "kc-big"}})
        _action(client, more[1], {"resize": {"flavorRef": "kc-big"}})
        _kill_and_restart(controller, cluster, client, s, 3)
        _settle(client, controller, dict.fromkeys(more, "VERIFY_RESIZE"))
        _action(client, more[0], {"revertResize": None})
        _action(client, more[1], {"confirmResize": None})
        live[more[1]] = "kc-big"
        _kill_and_restart(controller, cluster, client, s, 2)
        _settle(client, controller, {**dict.fromkeys(deleted), **dict.fromkeys(live, "ACTIVE")})

        for uuid, flavor in live.items():
            shown = _server(client, uuid)
            assert shown["status"] in SETTLED and shown["OS-EXT-STS:task_state"] is None, shown
            assert shown["flavor"]["original_name"] == flavor, shown
        _check_placement(placement, live, engine)
        _check_cluster(cluster, live, deleted)
        _check_sizing(cluster)
        # every server settled ACTIVE: no working state of a build or a move is left either
        assert _check_database(engine, live, deleted) == []
        assert controller.kills == 6
        assert all(controller.interrupted), controller.interrupted  # every kill cut work short


@pytest.mark.parametrize("engine_name", ENGINES)
def test_nothing_leaks_after_a_controller_killed_mid_reset_rebuild_reboot_and_move(engine_name, tmp_path,
                                                                                    placement_service):
    """On two nodes (a resize moves the server): a rebuild, a hard reboot and resizes under way; then an
    administrator's os-resetState out of VERIFY_RESIZE (the controller's sweep gives the old flavor back
    and drops its revisions and copies) and a revert of a move under way; the controller killed in each."""
    with _world(engine_name, tmp_path, placement_service, nodes=2) as (client, controller, cluster, placement,
                                                                       engine):
        live = {_boot(client, f"kr-{i}"): "kc-small" for i in range(4)}
        s = list(live)
        _settle(client, controller, dict.fromkeys(live, "ACTIVE"))

        # 1. a rebuild, a hard reboot and two resizes (each to the other node) under way
        _action(client, s[0], {"rebuild": {"imageRef": IMAGE}})
        _action(client, s[1], {"reboot": {"type": "HARD"}})
        for uuid in s[2:4]:
            _action(client, uuid, {"resize": {"flavorRef": "kc-big"}})
            live[uuid] = "kc-big"
        _kill_and_restart(controller, cluster, client, s, 3)
        _settle(client, controller, {s[0]: "ACTIVE", s[1]: "ACTIVE", s[2]: "VERIFY_RESIZE", s[3]: "VERIFY_RESIZE"})

        # 2. one resize reset by an administrator (the sweep closes it), the other reverted: both under way
        _post(client, f"/v2.1/servers/{s[2]}/action", {"os-resetState": {"state": "active"}}, headers=admin())
        _action(client, s[3], {"revertResize": None})
        live[s[3]] = "kc-small"
        _kill_and_restart(controller, cluster, client, s, 2)
        _kill_and_restart(controller, cluster, client, s, 3)  # and again while the new one recovers
        _settle(client, controller, dict.fromkeys(live, "ACTIVE"))

        for uuid, flavor in live.items():
            assert _server(client, uuid)["flavor"]["original_name"] == flavor
        # the sweep's and the revert's work are done: wait for the reset resize's migration to be closed
        deadline = time.monotonic() + 30
        while True:
            with db_api.reader(engine) as conn:
                statuses = dict(conn.execute(sa.select(models.MIGRATIONS.c.instance_uuid,
                                                       models.MIGRATIONS.c.status)).all())
            if statuses == {s[2]: "error", s[3]: "reverted"} or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert statuses == {s[2]: "error", s[3]: "reverted"}
        _check_placement(placement, live, engine)
        _check_cluster(cluster, live, set())
        _check_sizing(cluster)
        assert _check_database(engine, live, set()) == []
        # the first two kills cut work short (the third may find it done: it tests the recovery)
        assert all(controller.interrupted[:2]), controller.interrupted
