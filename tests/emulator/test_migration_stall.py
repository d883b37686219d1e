"""A live migration that does not converge on the built-in cluster: virt-handler's migration monitor lets the
pre-copy run (phase Running) until its completion timeout, completionTimeoutPerGiB × the guest memory in GiB,
and only then aborts it (no post-copy allowed), as KubeVirt v1.9 does. It is what holds a migration running
while a client force-completes or aborts it."""

from __future__ import annotations

import time

from openkeel_compute.emulator import Delays, Fault
from openkeel_compute.emulator import migrations as mig
from tests.emulator.conftest import NS, VM_NAME, phase
from tests.emulator.test_moves import VMIM, nodes3, shared_vm, start  # noqa: F401 (nodes3 is a fixture)


def test_a_stalled_migration_runs_until_its_completion_timeout_then_is_aborted(nodes3):  # noqa: F811
    cluster, client = nodes3
    # one KubeVirt second = 0.01 s: the default 150 s/GiB is 1.5 s a GiB of guest memory
    cluster.lifecycle.delays = Delays(**{**Delays.fast().__dict__, "kubevirt_second": 0.01})
    vmi = start(cluster, client, shared_vm())
    timeout = mig.completion_timeout(vmi, {}) * 0.01
    assert timeout >= 0.5, vmi["spec"]["domain"]
    cluster.inject(Fault(kind="migration-stall", name=VM_NAME))
    client.create(VMIM.from_dict({"metadata": {"name": "stuck"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)
    cluster.wait_for("VirtualMachineInstanceMigration", "stuck", NS, lambda o: phase(o) == "Running")
    running_since = time.monotonic()
    failed = cluster.wait_for("VirtualMachineInstanceMigration", "stuck", NS, lambda o: phase(o) == "Failed",
                              timeout=30)
    # the transfer (0.05 s here) is long over: the monitor waited for the completion timeout
    assert time.monotonic() - running_since >= 0.8 * timeout
    state = cluster.get("VirtualMachineInstance", VM_NAME, NS)["status"]["migrationState"]
    assert (state["abortStatus"], state["failureReason"]) == ("Succeeded", "Live migration has been aborted")
    assert failed["status"]["phase"] == "Failed"


def test_the_completion_timeout_is_per_gib_of_guest_memory():
    vmi = {"spec": {"domain": {"memory": {"guest": "512Mi"}}}}
    assert mig.completion_timeout(vmi, {}) == 75.0
    assert mig.completion_timeout(vmi, {"migrationConfiguration": {"completionTimeoutPerGiB": 10}}) == 5.0
    requests = {"spec": {"domain": {"resources": {"requests": {"memory": "2Gi"}}}}}
    assert mig.completion_timeout(requests, {}) == 300.0


def test_emulator_default_delays_keep_kubevirt_seconds():
    assert Delays().kubevirt_second == 1.0 and Delays.from_scale(0.05).kubevirt_second == 0.05
