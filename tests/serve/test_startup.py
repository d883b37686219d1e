"""Start-up runs with the cyclic collector paused and leaves it on, with the start-up objects frozen."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from openkeel_compute.startup import collector_paused


@pytest.fixture
def collector_state():
    """Each test starts with the collector on and nothing frozen, and leaves it so."""
    was_enabled = gc.isenabled()
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    if not was_enabled:
        gc.disable()


def test_paused_inside_then_frozen_and_back_on(collector_state):
    built = []
    with collector_paused():
        assert not gc.isenabled()
        built.append({"made": "during start-up"})
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    # what start-up built is in the permanent generation: no generation holds it any more
    assert all(not any(o is built for o in gc.get_objects(generation=g)) for g in range(3))


def test_nested_blocks_freeze_once_at_the_outermost(collector_state):
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled(), "the inner block must not turn the collector back on"
        assert gc.get_freeze_count() == 0
    assert gc.isenabled() and gc.get_freeze_count() > 0


def test_a_process_that_runs_without_the_collector_keeps_it_off(collector_state):
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_the_collector_comes_back_when_start_up_fails(collector_state):
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("start-up failed")
    assert gc.isenabled()


def test_the_wsgi_module_builds_the_app_and_leaves_the_collector_on(tmp_path):
    conf = tmp_path / "w.conf"
    conf.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\n[api]\nauth_strategy = noauth2\n")
    probe = ("import gc, json, openkeel_compute.wsgi as w; "
             "print(json.dumps([callable(w.application), gc.isenabled(), gc.get_freeze_count(), gc.get_count()[0]]))")
    out = subprocess.run([sys.executable, "-c", probe], env=dict(os.environ, OPENKEEL_CONFIG_FILES=str(conf)),
                         check=True, capture_output=True, text=True).stdout
    is_app, enabled, frozen, young = json.loads(out.splitlines()[-1])
    assert is_app and enabled
    # tens of thousands of objects (modules, classes, functions, the app) are frozen; a collector
    # that had run through start-up would have left them in the generations instead
    assert frozen > 50_000
    assert young < 700, "the young generation starts empty after the freeze"


COMMAND_LINE_PROBE = """
import gc, sys
from openkeel_compute.cmd import main

def frozen_after(call):
    try:
        call()
    except SystemExit:
        pass
    return gc.get_freeze_count()

sys.argv = ["openkeel-compute", "--help"]
print(gc.get_freeze_count(), frozen_after(lambda: main.main(["--help"])), frozen_after(main.run), gc.isenabled())
"""


def test_the_command_line_pauses_the_collector_only_as_a_program():
    out = subprocess.run([sys.executable, "-c", COMMAND_LINE_PROBE], check=True, capture_output=True,
                         text=True).stdout
    before, after_main, after_run, enabled = out.split()[-4:]
    assert (int(before), int(after_main)) == (0, 0), "main() is called by tests, many times: it must not freeze"
    assert int(after_run) > 0, "run() is a process's start: what it imported is frozen"
    assert enabled == "True"


def _glibc() -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL(None), "mallopt")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc(), reason="mallopt() is glibc's; other C libraries keep their own policy")
def test_serve_bounds_malloc_retention_unless_the_environment_decides():
    # run in a child: the settings are process-wide
    probe = ("import json, sys; from openkeel_compute.serving import bound_malloc_retention; "
             "print(json.dumps(bound_malloc_retention(json.loads(sys.argv[1]))))")

    def applied(environ):
        out = subprocess.run([sys.executable, "-c", probe, json.dumps(environ)], check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out.splitlines()[-1])

    assert applied({}) == {"M_ARENA_MAX": 1, "M_MMAP_THRESHOLD": 131072}
    assert applied({"MALLOC_ARENA_MAX": "4"}) == {"M_MMAP_THRESHOLD": 131072}
    assert applied({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}) == {"M_ARENA_MAX": 1}
