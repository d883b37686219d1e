"""Faults: the API server answering 500/409/410, refusing connections, the controller killed mid-batch.

Each test ends with the same check: the cluster holds exactly the desired objects, every outbox row is
done, and no object was created twice (one accepted POST per object, uids unchanged).
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import yaml

from openkeel_compute.controller import gateway
from openkeel_compute.emulator import Fault
from tests.conftest import placement_overrides, placement_section
from tests.controller.helpers import CIT, CPREF, IT, PREF, add_namespaces


def wait_for(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def assert_converged(apiserver, cat, public: set[str], private: dict[str, set[str]]) -> None:
    handler = apiserver.handler
    assert set(handler.objects(CIT)) == {(None, n) for n in public}
    assert set(handler.objects(CPREF)) == {(None, n) for n in public}
    copies = {(ns, n) for n, namespaces in private.items() for ns in namespaces}
    assert set(handler.objects(IT)) == copies and set(handler.objects(PREF)) == copies
    assert cat.pending() == [], "outbox rows left pending"
    created = [path for method, path, _ in handler.writes if method == "POST" and "instancetype.kubevirt" in path]
    expected = 2 * (len(public) + len(copies))
    assert len(created) == expected, f"{len(created)} creates for {expected} objects: something was created twice"


def test_500_answers_are_retried_and_nothing_is_lost(ctl, cat, apiserver):
    apiserver.handler.faults.append(Fault(500, method="POST", times=2))
    apiserver.handler.faults.append(Fault(503, method="GET", times=1))
    cat.create("a")
    cat.create("b")
    ctl.process_outbox()
    assert_converged(apiserver, cat, {"a", "b"}, {})


def test_500_beyond_the_retries_keeps_the_row_pending_until_it_passes(ctl, cat, apiserver):
    apiserver.handler.faults.append(Fault(500, method="POST", times=10))
    cat.create("a")
    report = ctl.process_outbox()
    assert report.transient and "500" in report.transient
    [row] = cat.pending()
    assert row.attempts == 1 and "500" in row.last_error
    apiserver.handler.faults.clear()
    ctl.process_outbox()
    assert_converged(apiserver, cat, {"a"}, {})


def test_409_on_a_write_means_re_observe_and_retry(ctl, cat, apiserver):
    cat.create("a", description="one")
    ctl.process_outbox()
    apiserver.handler.faults.append(Fault(409, method="PATCH", times=1))
    cat.describe("a", "two")
    assert ctl.process_outbox().transient is not None
    assert len(cat.pending()) == 1
    ctl.process_outbox()
    assert apiserver.handler.get(CIT, "a")["metadata"]["annotations"]["openkeel.io/flavor-description"] == "two"
    assert_converged(apiserver, cat, {"a"}, {})


def test_410_on_a_paged_list_relists_from_the_start(ctl, cat, apiserver, monkeypatch):
    monkeypatch.setattr(gateway, "LIST_CHUNK", 1)
    for name in ("a", "b", "c"):
        cat.create(name)
    ctl.resync()
    apiserver.handler.expire_continue = 2
    writes = len(apiserver.handler.writes)
    report = ctl.resync()
    assert report.transient is None and report.total_writes == 0
    assert apiserver.handler.expire_continue == 0 and len(apiserver.handler.writes) == writes
    assert_converged(apiserver, cat, {"a", "b", "c"}, {})


def test_connections_refused_mid_run_then_convergence(ctl, cat, apiserver):
    add_namespaces(apiserver, "proj-a")
    stop = threading.Event()
    runner = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
    runner.start()
    try:
        cat.create("a")
        wait_for(lambda: not cat.pending(), what="first flavor")
        apiserver.down()
        cat.create("b")
        cat.create("c", public=False, access=("proj-a",))
        cat.delete("a")
        time.sleep(0.5)
        assert len(cat.pending()) == 4  # b, c + its access, a: nothing is marked done while the server is away
        apiserver.up()
        wait_for(lambda: not cat.pending(), what="convergence after the outage")
    finally:
        stop.set()
        runner.join(5)
    assert set(apiserver.handler.objects(CIT)) == {(None, "b")}
    assert set(apiserver.handler.objects(IT)) == {("proj-a", "c")}
    creates = collections.Counter(path for method, path, _ in apiserver.handler.writes if method == "POST")
    assert sum(creates.values()) == 6  # a, b (2 each) + c (2): nothing created twice


def _config_file(conf) -> str:
    return conf.config_file[0]


def test_controller_killed_mid_batch_and_restarted(conf, cat, apiserver, tmp_path, placement_service):
    from openkeel_compute.controller import service

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(apiserver.kubeconfig()))
    extra = tmp_path / "controller.conf"
    extra.write_text("[controller]\nlease_duration = 1\nlease_renew_interval = 0.2\nmetrics_port = 0\n"
                     "poll_interval = 0.05\nworkers = 1\n"
                     + placement_section(placement_service))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "openkeel_compute.cmd.main", "controller", "--config-file", _config_file(conf),
         "--config-file", str(extra), "--kubeconfig", str(kubeconfig)],
        env=env, stdout=subprocess.DEVNULL, stderr=tempfile.TemporaryFile())  # noqa: SIM115 - a file, as a pipe fills up; gone with the test
    try:
        wait_for(lambda: apiserver.handler.get("Lease", "openkeel-compute-controller", "default") is not None,
                 timeout=30, what="the controller to take the lease")
        time.sleep(0.3)  # its start-up resync of the empty catalogue is done
        apiserver.handler.hold_after = 7  # accept 7 more writes, then hang the 8th: kill during the batch
        for i in range(8):
            cat.create(f"f{i}")
        wait_for(apiserver.handler.holding.is_set, timeout=20, what="the controller to be mid-batch")
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
    before = apiserver.handler.objects(CIT) | {("pref", n): o for (_, n), o in apiserver.handler.objects(CPREF).items()}
    assert 0 < len(before) < 16 and cat.pending(), "the kill did not land mid-batch"
    apiserver.handler.hold_after = None

    from tests.conftest import make_conf

    restarted = make_conf(tmp_path, controller={"lease_duration": "1", "lease_renew_interval": "0.2"},
                          placement=placement_overrides(placement_service),
                          database={"connection": conf.database.connection})
    assert service.run(restarted, kubeconfig=str(kubeconfig), once=True) == 0  # waits out the dead holder's lease
    assert_converged(apiserver, cat, {f"f{i}" for i in range(8)}, {})
    after = apiserver.handler.objects(CIT) | {("pref", n): o for (_, n), o in apiserver.handler.objects(CPREF).items()}
    for key, obj in before.items():
        assert after[key]["metadata"]["uid"] == obj["metadata"]["uid"]
    lease = apiserver.handler.get("Lease", "openkeel-compute-controller", "default")
    assert lease["spec"]["leaseTransitions"] == 1
