"""The server loop under faults, against the built-in cluster: objects whose server is gone, a VM removed
behind the controller's back, a Kubernetes API that stops answering, a controller killed mid-build and
restarted, and what a restart must remember (the hard reboot's old VMI, the task's event)."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time

import yaml
from sqlalchemy import func, select

from openkeel_compute.compute import preconditions
from openkeel_compute.compute.instances import cas, deletion, instance_actions, store, updates
from openkeel_compute.controller.kube import DATA_VOLUME, VM, make_client
from openkeel_compute.controller.servers import ServerLoop, make_loop
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.emulator import Delays, Emulator, Fault
from openkeel_compute.kubevirt.vmstatus import VM_GONE_MESSAGE
from openkeel_compute.model import states
from openkeel_compute.model.sysmeta import REPLACED_VMI as SYSMETA_OLD_VMI
from openkeel_compute.model.sysmeta import TASK_EVENT as SYSMETA_EVENT
from tests.conftest import make_conf, placement_overrides, placement_section, user
from tests.controller.helpers import (
    FAST_RETRY,
    MANAGED,
    OWNER,
    Both,
    action,
    active,
    boot,
    controller_for,
    pending,
    row_of,
    until,
)

ORPHAN = "0b1c2d3e-0000-4000-8000-00000000dead"
FOREIGN = "0b1c2d3e-0000-4000-8000-0000000f0e19"


def _cluster(**slower) -> Emulator:
    return Emulator(delays=dataclasses.replace(Delays.fast(), **slower), tick=0.01,
                    read_images=False).start()  # its image URLs are never served


def _faults(engine, uuid: str) -> list[dict]:
    table = models.INSTANCE_FAULTS
    with db_api.reader(engine) as conn:
        return [dict(r) for r in conn.execute(select(table).where(table.c.instance_uuid == uuid)).mappings()]


def _events(engine, uuid: str, request_id: str) -> list[tuple[str, str | None]]:
    with db_api.reader(engine) as conn:
        return [(e["event"], e["result"]) for e in instance_actions.get_action(conn, uuid, request_id)["events"]]


def _sysmeta(engine, uuid: str) -> dict[str, str]:
    with db_api.reader(engine) as conn:
        return store.metadata_of(conn, uuid, system=True)


def _vm(name: str, namespace: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}}


# -- orphans -----------------------------------------------------------------------------------------

def test_objects_of_servers_that_are_gone_are_removed_foreign_ones_never(loop, db, apiserver):
    live = boot(db)
    gone = boot(db)
    until(loop, db, live, active)
    namespace = until(loop, db, gone, active)["namespace"]
    with db_api.transaction(db) as conn:  # its row went without the controller (deleted, purged...)
        deletion.soft_delete(conn, gone)
    apiserver.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
    ours = {**MANAGED, "openkeel.io/server-id": ORPHAN}
    apiserver.seed(_vm(ORPHAN, "elsewhere", ours))
    apiserver.seed({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": f"{ORPHAN}-user-data", "namespace": "elsewhere", "labels": ours}, "data": {}})
    # Not managed by us, whatever their other labels say: never touched.
    apiserver.seed(_vm(FOREIGN, "elsewhere", {"openkeel.io/server-id": FOREIGN}))
    apiserver.seed(_vm("theirs", "elsewhere", {"app.kubernetes.io/managed-by": "someone-else",
                                               "openkeel.io/server-id": FOREIGN}))
    # ... nor beside an orphan: same server-id label or same name, but not managed by us
    apiserver.seed({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "keep-me", "namespace": "elsewhere", "labels": {"openkeel.io/server-id": ORPHAN}}, "data": {}})
    apiserver.seed({"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachinePreference",
                    "metadata": {"name": ORPHAN, "namespace": "elsewhere"}, "spec": {}})

    removed = loop.servers.sweep_orphans()

    assert removed == sorted([ORPHAN, gone])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (apiserver.get("VirtualMachine", ORPHAN, "elsewhere")
                                           or apiserver.get("VirtualMachine", gone, namespace)):
        time.sleep(0.05)
    assert apiserver.get("VirtualMachine", ORPHAN, "elsewhere") is None
    assert apiserver.get("Secret", f"{ORPHAN}-user-data", "elsewhere") is None
    assert apiserver.get("VirtualMachine", gone, namespace) is None
    assert [k for k in apiserver.objects("Secret") if k[1].startswith(gone)] == []
    assert apiserver.get("VirtualMachine", FOREIGN, "elsewhere") is not None
    assert apiserver.get("VirtualMachine", "theirs", "elsewhere") is not None
    assert apiserver.get("Secret", "keep-me", "elsewhere") is not None
    assert apiserver.get("VirtualMachinePreference", ORPHAN, "elsewhere") is not None
    assert apiserver.get("VirtualMachine", live, namespace) is not None
    assert active(row_of(db, live))
    assert loop.servers.sweep_orphans() == []


def test_the_sweep_runs_from_the_pass_on_its_interval(kube, db, ctl, apiserver):
    clock = [0.0]
    servers = make_loop(kube, db, orphan_interval=300, clock=lambda: clock[0])
    apiserver.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
    apiserver.seed(_vm(ORPHAN, "elsewhere", {**MANAGED, "openkeel.io/server-id": ORPHAN}))
    servers.run_once()  # the first pass sweeps
    apiserver.wait_for("VirtualMachine", ORPHAN, "elsewhere", lambda o: o is None, timeout=10)
    apiserver.seed(_vm(ORPHAN, "elsewhere", {**MANAGED, "openkeel.io/server-id": ORPHAN}))
    clock[0] = 299
    servers.run_once()
    assert apiserver.get("VirtualMachine", ORPHAN, "elsewhere") is not None  # not yet
    clock[0] = 301
    servers.run_once()
    apiserver.wait_for("VirtualMachine", ORPHAN, "elsewhere", lambda o: o is None, timeout=10)


# -- a VM removed behind our back ----------------------------------------------------------------------

def test_a_vm_deleted_behind_our_back_is_powered_off_by_the_sync(loop, db, kube):
    """Nova's power sync finding no guest: SHUTOFF, no fault (a start makes the VM again:
    tests/controller/test_server_gone.py)."""
    uuid = boot(db)
    row = until(loop, db, uuid, active)
    kube.delete(VM, uuid, namespace=row["namespace"])
    # a pass may first see the VM on its way out (stopped, power SHUTDOWN); the next finds no guest at all
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED and r["power_state"] == 0)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.STOPPED, None, 0)
    for _ in range(3):
        loop.run_once()
    assert _faults(db, uuid) == []


def test_a_vm_deleted_during_the_build_ends_it_in_error(apiserver, kube, db, ctl):
    apiserver.inject(Fault(kind="unschedulable"))  # the build waits (the grace is long)
    servers = make_loop(kube, db, unschedulable_grace=3600)
    both = Both(ctl, servers)
    uuid = boot(db)
    both.run_once()
    row = row_of(db, uuid)
    assert row["vm_state"] == states.BUILDING and row["vm_name"] == uuid
    kube.delete(VM, uuid, namespace=row["namespace"])
    row = until(both, db, uuid, lambda r: r["vm_state"] != states.BUILDING)
    assert (row["vm_state"], row["task_state"]) == (states.ERROR, None)
    assert [f["message"] for f in _faults(db, uuid)] == [VM_GONE_MESSAGE]
    assert _events(db, uuid, OWNER.request_id) == [("compute__do_build_and_run_instance", "Error")]


# -- the Kubernetes API away ---------------------------------------------------------------------------

def test_an_api_outage_keeps_the_api_serving_the_states_honest_and_loses_no_action(loop, db, apiserver, conf):
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    api = Client(deploy(conf))
    headers = user(OWNER.project_id, OWNER.user_id)
    uuid = boot(db)
    until(loop, db, uuid, active)
    apiserver.down()
    try:
        stop = api.post(f"/v2.1/servers/{uuid}/action", headers=headers, json_body={"os-stop": None})
        assert stop.status_code == 202, stop.text
        request_id = stop.header("x-openstack-request-id")
        for _ in range(3):
            loop.run_once()  # nothing raises: each pass reports and keeps going
        shown = api.get(f"/v2.1/servers/{uuid}", headers=headers)
        assert shown.status_code == 200
        server = shown.json["server"]
        assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", "powering-off")
        assert len(pending(db)) == 1  # the acknowledged stop waits in the outbox
        with db_api.reader(db) as conn:
            attempts, error = conn.execute(select(models.OUTBOX.c.attempts, models.OUTBOX.c.last_error).where(
                models.OUTBOX.c.object_id == uuid, models.OUTBOX.c.done_at.is_(None))).one()
        assert attempts >= 3 and error.startswith("stop: ")
        assert row_of(db, uuid)["power_state"] == states.power_state.RUNNING  # last seen, not guessed
    finally:
        apiserver.up()
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (
        states.STOPPED, None, states.power_state.SHUTDOWN)
    assert pending(db) == []
    assert _events(db, uuid, request_id) == [("compute_stop_instance", "Success")]


def test_answers_of_5xx_keep_rows_pending_and_states_unchanged(loop, db, apiserver):
    uuid = boot(db)
    until(loop, db, uuid, active)
    action(db, uuid, "pause", "pause")
    apiserver.inject(Fault(503, times=10**6))
    for _ in range(3):
        loop.servers.run_once()
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"]) == (states.ACTIVE, "pausing")
    assert len(pending(db)) == 1
    apiserver.clear_faults()
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.PAUSED)
    assert (row["vm_state"], row["task_state"]) == (states.PAUSED, None) and pending(db) == []


# -- restarts ------------------------------------------------------------------------------------------

def test_a_restarted_controller_finishes_a_hard_reboot_only_on_the_new_vmi(db, ctl, conf):
    cluster = _cluster(stopping=1.0)  # the old VMI runs for a second after the restart is asked
    client = make_client(cluster.kubeconfig())
    try:
        ctl_here = controller_for(conf, cluster)
        first = Both(ctl_here, make_loop(client, db))
        uuid = boot(db)
        row = until(first, db, uuid, active)
        old = cluster.get("VirtualMachineInstance", uuid, row["namespace"])["metadata"]["uid"]
        with db_api.transaction(db) as conn:
            cas.begin_action(conn, uuid, preconditions.precondition("reboot", reboot_type="HARD"), OWNER)
            updates.outbox(conn, uuid, "reboot-hard", OWNER)
        first.process_outbox()  # the restart is asked; then this controller is gone
        assert _sysmeta(db, uuid)[SYSMETA_OLD_VMI] == old
        assert SYSMETA_EVENT in _sysmeta(db, uuid)

        second = Both(ctl_here, make_loop(client, db))  # a new process: nothing in memory
        second.servers.observe_all()
        assert row_of(db, uuid)["task_state"] == "reboot_started_hard"  # the old VMI still runs: not done
        row = until(second, db, uuid, active)
        assert cluster.get("VirtualMachineInstance", uuid, row["namespace"])["metadata"]["uid"] != old
        assert _events(db, uuid, OWNER.request_id) == [("compute_reboot_instance", "Success")]
        assert not {SYSMETA_EVENT, SYSMETA_OLD_VMI} & _sysmeta(db, uuid).keys()
        ctl_here.backend.close()
    finally:
        client.close()
        cluster.stop()


def _tail(log) -> str:
    log.seek(0)
    return log.read().decode()[-2000:]


def test_controller_killed_mid_build_resumes_from_the_outbox(conf, db, apiserver, tmp_path, placement_service):
    from openkeel_compute.controller import service

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(apiserver.kubeconfig()))
    settings = ("[controller]\nlease_duration = 1\nlease_renew_interval = 0.2\nmetrics_port = 0\n"
                "poll_interval = 0.05\nworkers = 1\n[glance]\napi_servers = http://127.0.0.1:9292\n"
                + placement_section(placement_service))
    extra = tmp_path / "controller.conf"
    extra.write_text(settings)
    # The VM is created, but starting it keeps failing: the create row stays pending mid-way.
    apiserver.inject(Fault(503, method="PUT", plural="virtualmachines", times=10**6))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # the controller's log: a pipe nobody reads would stop it once full
    log = tempfile.TemporaryFile()  # noqa: SIM115 - gone with the test
    process = subprocess.Popen(
        [sys.executable, "-m", "openkeel_compute.cmd.main", "controller", "--config-file", conf.config_file[0],
         "--config-file", str(extra), "--kubeconfig", str(kubeconfig)],
        env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        uuid = boot(db)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with db_api.reader(db) as conn:
                attempts = conn.execute(select(func.max(models.OUTBOX.c.attempts)).where(
                    models.OUTBOX.c.object_id == uuid)).scalar()
            if attempts and apiserver.get("VirtualMachine", uuid, row_of(db, uuid)["namespace"] or "-"):
                break
            assert process.poll() is None, _tail(log)
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
    row = row_of(db, uuid)
    vm = apiserver.get("VirtualMachine", uuid, row["namespace"])
    assert vm is not None and row["vm_state"] == states.BUILDING, "the kill did not land mid-build"
    assert apiserver.get("VirtualMachineInstance", uuid, row["namespace"]) is None
    assert len(pending(db)) == 1
    apiserver.clear_faults()

    restarted = make_conf(tmp_path, controller={"lease_duration": "1", "lease_renew_interval": "0.2"},
                          glance={"api_servers": "http://127.0.0.1:9292"}, placement=placement_overrides(placement_service),
                          database={"connection": conf.database.connection})
    deadline = time.monotonic() + 60
    while not active(row_of(db, uuid)) and time.monotonic() < deadline:
        service.run(restarted, kubeconfig=str(kubeconfig), once=True)  # waits out the dead holder's lease
        time.sleep(0.05)
    row = row_of(db, uuid)
    assert active(row) and pending(db) == []
    assert apiserver.get("VirtualMachine", uuid, row["namespace"])["metadata"]["uid"] == vm["metadata"]["uid"]
    assert _events(db, uuid, OWNER.request_id) == [("compute__do_build_and_run_instance", "Success")]
    db_api.dispose_all()


# -- the image token -----------------------------------------------------------------------------------

def _token_conf(tmp_path, token: str | None):
    extra = {"service_user": {"auth_type": "admin_token", "token": token, "endpoint": "http://glance.test:9292"}} \
        if token else {}
    conf = make_conf(tmp_path, glance={"api_servers": "http://glance.test:9292"}, **extra)
    return conf


def test_the_image_is_imported_with_the_service_token_in_a_secret(tmp_path, apiserver, kube, db, ctl):
    conf = _token_conf(tmp_path, "svc-token-1")
    both = Both(ctl, server_loop_from(conf, db, kube))
    uuid = boot(db)
    row = until(both, db, uuid, active)
    namespace = row["namespace"]
    vm = apiserver.get("VirtualMachine", uuid, namespace)
    http = vm["spec"]["dataVolumeTemplates"][0]["spec"]["source"]["http"]
    assert http == {"url": f"http://glance.test:9292/v2/images/{row_of(db, uuid)['image_ref']}/file",
                    "secretExtraHeaders": [f"{uuid}-image-token"]}
    secret = apiserver.get("Secret", f"{uuid}-image-token", namespace)
    assert base64.b64decode(secret["data"]["header"]) == b"X-Auth-Token:svc-token-1"
    assert secret["metadata"]["labels"]["openkeel.io/server-id"] == uuid
    action(db, uuid, "delete", "delete")
    until(both, db, uuid, lambda r: r["deleted"] != 0)
    assert apiserver.get("Secret", f"{uuid}-image-token", namespace) is None


def test_without_a_service_credential_no_token_secret(tmp_path, apiserver, kube, db, ctl):
    both = Both(ctl, server_loop_from(_token_conf(tmp_path, None), db, kube))
    uuid = boot(db)
    row = until(both, db, uuid, active)
    http = apiserver.get("VirtualMachine", uuid, row["namespace"])["spec"]["dataVolumeTemplates"][0]["spec"][
        "source"]["http"]
    assert http == {"url": f"http://glance.test:9292/v2/images/{row['image_ref']}/file"}
    assert apiserver.get("Secret", f"{uuid}-image-token", row["namespace"]) is None


@contextlib.contextmanager
def _importing(tmp_path, db, conf):
    """A cluster whose imports take 30 s, the controller with a service token, and a server booted there
    whose root disk is still importing: (cluster, client, the server loop, both loops, server uuid)."""
    cluster = _cluster(import_duration=30.0)
    client = make_client(cluster.kubeconfig())
    ctl_here = controller_for(conf, cluster)
    try:
        servers: ServerLoop = server_loop_from(_token_conf(tmp_path, "svc-token-1"), db, client)
        both = Both(ctl_here, servers)
        uuid = boot(db)
        both.run_once()
        yield cluster, client, servers, both, uuid
    finally:
        ctl_here.backend.close()
        client.close()
        cluster.stop()


def test_a_renewed_token_is_written_while_the_import_runs(tmp_path, db, conf):
    with _importing(tmp_path, db, conf) as (cluster, client, servers, both, uuid):
        namespace = row_of(db, uuid)["namespace"]
        # the cluster's own VM controller makes the DataVolume from the VM's template, a moment later
        [template] = cluster.get("VirtualMachine", uuid, namespace)["spec"]["dataVolumeTemplates"]
        cluster.wait_for("DataVolume", template["metadata"]["name"], namespace, lambda o: o is not None, timeout=20)
        dvs = client.list(DATA_VOLUME, namespace=namespace)
        assert [(d.to_dict().get("status") or {}).get("phase") != "Succeeded" for d in dvs] == [True]
        servers.objects.images.auth.token = "svc-token-2"  # keystoneauth handed out a new token
        both.run_once()
        secret = cluster.get("Secret", f"{uuid}-image-token", namespace)
        assert base64.b64decode(secret["data"]["header"]) == b"X-Auth-Token:svc-token-2"


def test_a_server_deleted_while_its_image_imports_is_deleted(tmp_path, db, conf):
    """The token Secret is renewed only for a build still under way: a delete during the import must
    not write it again after removing it (the server would wait in deleting for ever)."""
    with _importing(tmp_path, db, conf) as (cluster, _client, servers, both, uuid):
        namespace = row_of(db, uuid)["namespace"]
        servers.objects.images.auth.token = "svc-token-2"  # a renewal falls due while the delete runs
        action(db, uuid, "delete", "delete")
        row = until(both, db, uuid, lambda r: r["deleted"] != 0)
        assert row["vm_state"] == states.DELETED
        assert cluster.get("Secret", f"{uuid}-image-token", namespace) is None


# -- rows that keep failing ----------------------------------------------------------------------------

def test_a_delete_does_not_wait_behind_a_create_the_cluster_keeps_refusing(loop, db, apiserver):
    apiserver.inject(Fault(403, method="PATCH", plural="secrets", times=10**6))
    uuid = boot(db)
    for _ in range(2):
        loop.run_once()
    assert len(pending(db)) == 1 and row_of(db, uuid)["vm_state"] == states.BUILDING
    action(db, uuid, "delete", "delete")
    row = until(loop, db, uuid, lambda r: r["deleted"] != 0)
    assert row["vm_state"] == states.DELETED and pending(db) == []
    assert apiserver.get("VirtualMachine", uuid, row["namespace"] or "-") is None


def test_a_build_that_timed_out_gets_no_vm_when_the_cluster_comes_back(kube, db, ctl, apiserver):
    import datetime as dt

    later = lambda: models.utcnow() + dt.timedelta(hours=2)
    servers = make_loop(kube, db, build_timeout=3600, now=later, retry=FAST_RETRY)
    apiserver.inject(Fault(503, method="PATCH", times=10**6))
    uuid = boot(db)
    servers.run_once()
    assert row_of(db, uuid)["vm_state"] == states.ERROR
    apiserver.clear_faults()
    servers.run_once()
    assert pending(db) == []
    assert [k for k in apiserver.objects("VirtualMachine") if k[1] == uuid] == []
    assert [k for k in apiserver.objects("Secret") if k[1].startswith(uuid)] == []


# -- cost ----------------------------------------------------------------------------------------------

def test_observing_all_servers_costs_three_lists_not_three_reads_per_server(loop, db, apiserver):
    uuids = [boot(db) for _ in range(4)]
    for uuid in uuids:
        until(loop, db, uuid, active)
    counter = Fault(500, method="GET", after=10**9)  # never fires: counts the reads
    apiserver.inject(counter)
    loop.servers.observe_all()
    assert counter.matched == 3
    assert all(active(row_of(db, uuid)) for uuid in uuids)


def test_with_watches_a_pass_reads_nothing_from_the_cluster(kube, db, ctl, apiserver):
    servers = make_loop(kube, db, watch=True)
    try:
        both = Both(ctl, servers)
        uuids = [boot(db) for _ in range(3)]
        for uuid in uuids:
            until(both, db, uuid, active)
        assert servers.watched.synced
        counter = Fault(500, method="GET", after=10**9)  # never fires: counts the reads
        apiserver.inject(counter)
        servers.observe_all()
        assert counter.matched == 0
        # and the watches follow the cluster: a stop ends SHUTOFF through them
        action(db, uuids[0], "stop", "stop")
        row = until(both, db, uuids[0], lambda r: r["vm_state"] == states.STOPPED)
        assert (row["vm_state"], row["task_state"]) == (states.STOPPED, None)
        # a VM removed behind our back is seen through the watch, confirmed by a read, and powered off by
        # the sync (Nova's power sync finding no guest)
        kube.delete(VM, uuids[1], namespace=row["namespace"])
        assert until(both, db, uuids[1], lambda r: r["vm_state"] == states.STOPPED)["vm_state"] == states.STOPPED
    finally:
        servers.close()


def test_watches_list_again_after_an_outage(kube, db, ctl, apiserver):
    servers = make_loop(kube, db, watch=True)
    servers.watched.retry_delay = 0.1
    try:
        both = Both(ctl, servers)
        uuid = boot(db)
        until(both, db, uuid, active)
        apiserver.down()
        deadline = time.monotonic() + 10
        while servers.watched.synced and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not servers.watched.synced
        assert servers.watched.snapshot() is None  # the loop lists instead (and reports the outage)
        apiserver.up()
        action(db, uuid, "pause", "pause")
        assert until(both, db, uuid, lambda r: r["vm_state"] == states.PAUSED)["vm_state"] == states.PAUSED
        deadline = time.monotonic() + 10
        while not servers.watched.synced and time.monotonic() < deadline:
            time.sleep(0.05)
        assert servers.watched.synced
    finally:
        servers.close()
