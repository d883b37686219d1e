"""A small seeded run of the servers differential (tools/server_api_differential.py): the same 200
generated requests to a fresh Nova 34.0.0 servers oracle and to a fresh OpenKeel (API, controller on its
built-in cluster, the local image service with the oracle's fixture images), and not one mismatch.

Skips without ../shared or without the oracle's venv (made by the first
``../shared/nova-oracle/run-servers-oracle.sh start``); about 60 s on a quiet machine. Ports: free ones,
or OPENKEEL_DIFF_PORT (the oracle) and the three after it (OpenKeel's API, image service, cluster).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys

from tests._shared import ROOT
from tests.api import oracles


def _tool():
    spec = importlib.util.spec_from_file_location("server_api_differential",
                                                  ROOT / "tools" / "server_api_differential.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_200_generated_requests_answer_as_nova(capsys):
    oracles.oracle_script("run-servers-oracle.sh")  # its virtualenv made once, whichever test comes first
    tool = _tool()
    base = int(os.environ.get("OPENKEEL_DIFF_PORT", "0"))
    oracle = tool.Oracle(base or _free_port())
    ours = tool.OpenKeel(base + 1 if base else None)
    try:
        oracle.start()
        ours.start(tool.oracle_flavors(oracle.url))
        result = tool.run(oracle.url, ours.url, count=200, seed=20261203)
    finally:
        ours.stop()
        oracle.stop()
    tool.report(result, max_print=20)
    report = capsys.readouterr().out
    assert result["identical"] + len(result["explained"]) == 200, report
    assert not result["mismatches"], report
    assert not any(result["stuck"].values()), report
    # the run covers every route of the table, and boots servers that the other routes then use
    assert set(result["per_kind"]) == set(tool.ROUTES) | set(tool.SEQUENCE_ONLY), report
    assert result["per_kind"]["POST /servers"][1] >= 5, report
