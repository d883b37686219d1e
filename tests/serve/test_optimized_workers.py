"""The workers of a multi-worker API run with Python's -OO where the installation holds its bytecode.

-OO leaves docstrings (and asserts) out of every module a worker imports: ~5 MiB per worker. Without
that bytecode each worker would compile every module from source at each start, so the supervisor
then runs without it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import py_compile
import sys
import urllib.error
import urllib.request

from openkeel_compute import serving
from tests.processes import tree_of
from tests.serve.helpers import cmdline_of, expected_root_document, root_document, serve_with_workers


def _package(tmp_path, monkeypatch, name: str) -> str:
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    source = pkg / "mod.py"
    source.write_text('"""A docstring."""\nVALUE = 1\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return str(source)


def test_optimized_bytecode_is_there_only_when_every_module_has_its_opt2_file(tmp_path, monkeypatch):
    source = _package(tmp_path, monkeypatch, "okprobe_optimized")
    try:
        assert serving.optimized_bytecode(("okprobe_optimized.mod",)) is False
        py_compile.compile(source, cfile=importlib.util.cache_from_source(source, optimization=""), optimize=0)
        assert serving.optimized_bytecode(("okprobe_optimized.mod",)) is False  # the plain bytecode is not it
        py_compile.compile(source, cfile=importlib.util.cache_from_source(source, optimization=2), optimize=2)
        assert serving.optimized_bytecode(("okprobe_optimized.mod",)) is True
        # every module must have it; one that does not exist, or has no source file, has none
        assert serving.optimized_bytecode(("okprobe_optimized.mod", "okprobe_optimized.absent")) is False
        assert serving.optimized_bytecode(("okprobe_optimized.mod", "sys")) is False
        assert serving.optimized_bytecode(("okprobe_optimized.mod", "no_such_package.mod")) is False
    finally:
        for name in ("okprobe_optimized.mod", "okprobe_optimized"):
            sys.modules.pop(name, None)


def test_the_supervisor_command_line_carries_OO_only_when_asked():
    optimized = serving.supervisor_argv("127.0.0.1", 8774, 4, 2, True)
    plain = serving.supervisor_argv("127.0.0.1", 8774, 4, 2, False)
    assert optimized == [sys.executable, "-OO", "-m", "openkeel_compute.serving", "127.0.0.1", "8774", "4", "2"]
    assert plain == [sys.executable, "-m", "openkeel_compute.serving", "127.0.0.1", "8774", "4", "2"]


def _call(port: int, method: str, path: str, body=None, mv: str = "2.61"):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"X-Auth-Token": "admin:admin", "Content-Type": "application/json",
                 "X-OpenStack-Nova-API-Version": mv})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_two_workers_run_with_OO_where_the_bytecode_is_there_and_answer_as_one(tmp_path):
    expected_oo = serving.optimized_bytecode()  # what this installation holds decides
    port, server = serve_with_workers(tmp_path, 2)
    with server as proc:
        assert root_document(port) == expected_root_document(port)
        tree = tree_of(proc.pid, 3)
        assert len(tree) == 3, tree
        for pid in tree:  # a forked worker shows its supervisor's command line, and runs with its flags
            assert ("-OO" in cmdline_of(pid).split()) is expected_oo, (pid, cmdline_of(pid))
        # what a worker runs: validation and its messages, the extra-spec validators, views, faults
        status, body = _call(port, "POST", "/v2.1/flavors",
                             {"flavor": {"name": "oo", "ram": 512, "vcpus": 2, "disk": 1, "id": "oo"}})
        assert status == 200, body
        status, body = _call(port, "POST", "/v2.1/flavors/oo/os-extra_specs",
                             {"extra_specs": {"hw:cpu_policy": "dedicated"}}, mv="2.86")
        assert (status, body) == (200, {"extra_specs": {"hw:cpu_policy": "dedicated"}})
        status, body = _call(port, "POST", "/v2.1/flavors/oo/os-extra_specs",
                             {"extra_specs": {"hw:cpu_policy": "sometimes"}}, mv="2.86")
        assert (status, body) == (400, {"badRequest": {
            "code": 400, "message": "Validation failed; 'sometimes' is not one of: dedicated, shared, mixed."}})
        status, body = _call(port, "POST", "/v2.1/flavors", {"flavor": {"name": "x", "ram": -1, "vcpus": 1, "disk": 1}})
        assert status == 400 and body["badRequest"]["code"] == 400, body
        for _ in range(6):  # the kernel spreads connections over both workers
            status, body = _call(port, "GET", "/v2.1/flavors/detail")
            assert status == 200
            assert [(f["id"], f["extra_specs"]) for f in body["flavors"] if f["id"] == "oo"] == [
                ("oo", {"hw:cpu_policy": "dedicated"})]
            status, body = _call(port, "GET", "/v2.1/flavors/nope")
            assert (status, body) == (404, {"itemNotFound": {"code": 404, "message": "Flavor nope could not be found."}})
        said = proc.stdout.read()
        if expected_oo:
            assert "the workers run with Python's -OO (no docstrings: less memory per worker)" in said
        else:
            assert "the workers keep their docstrings: this installation has no -OO bytecode" in said
    assert proc.returncode == 0
