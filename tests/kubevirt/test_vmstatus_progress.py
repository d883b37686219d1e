"""A server's progress: the image import's during the build, 0 once it is ACTIVE (as Nova shows it)."""

from __future__ import annotations

from tests.kubevirt.objects import IMPORTING, dv, run, server, vm, vmi


def test_a_finished_build_resets_the_import_progress():
    building = run(server("building", "scheduling", launched=False), vm(), None, [IMPORTING])
    assert building.progress == 45
    done = run(server("building", "block_device_mapping", launched=False), vm(), vmi("Running"),
               [dv("Succeeded", "100.0%")])
    assert (done.vm_state, done.task_state, done.progress) == ("active", None, 0)
