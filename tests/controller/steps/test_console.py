"""The console-output step on its own (controller/steps/console.py): a pending console request, the fake
cluster's launcher pods and their guest-console-log, and the answer written for the API to read.
tests/controller/test_console_output*.py and the API's tests drive the same step end to end."""

from __future__ import annotations

from typing import Any

import httpx2

from openkeel_compute.compute import console as console_rows
from openkeel_compute.controller.steps import console
from openkeel_compute.controller.steps.base import DONE, ServerRow
from openkeel_compute.db import api as db_api
from openkeel_compute.model import operations as ops
from tests.controller.helpers import OWNER, boot


def _pod(name: str, vmi_uid: str, *, phase: str = "Running", logged: bool = True, created: str = "") -> dict[str, Any]:
    containers = [{"name": "compute"}, *([{"name": console.CONTAINER}] if logged else [])]
    return {"metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created,
                         "labels": {console.CREATED_BY: vmi_uid}},
            "spec": {"containers": containers}, "status": {"phase": phase}}


def _ask(db, uuid: str, length: int | None = None) -> console_rows.Request:
    with db_api.transaction(db) as conn:
        return console_rows.request(conn, uuid, length)


def _answer(ctx, db, uuid: str, request) -> Any:
    assert console.run(ctx, ServerRow(1, uuid, ops.CONSOLE_OUTPUT, {"request_id": OWNER.request_id}), None) is DONE
    with db_api.reader(db) as conn:
        answer = console_rows.answered(conn, request)
    assert answer is not None
    return answer


def test_the_console_is_the_guest_console_log_of_the_vmis_running_pod(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running", uid="vmi-9")
    cluster.launchers = [_pod("other", "vmi-1"), _pod("gone", "vmi-9", phase="Succeeded"), _pod("launcher", "vmi-9")]
    cluster.logs = {"launcher": b"one\ntwo\nthree\n\xff", "other": b"not this one"}
    request = _ask(db, uuid, length=2)
    answer = _answer(ctx, db, uuid, request)
    # the cluster is asked for the last lines only, and Nova's cut and ASCII decoding are applied
    assert ("pod_log", "launcher", console.CONTAINER, 2) in cluster.calls
    assert (answer.output, answer.error) == ("three\n\ufffd", None)


def test_of_several_running_pods_the_vmis_active_one_is_read(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running", uid="vmi-9")
    cluster.vmis[uuid]["status"]["activePods"] = {"uid-target": "node-2"}
    cluster.launchers = [_pod("source", "vmi-9", created="1"), _pod("target", "vmi-9", created="2")]
    cluster.logs = {"source": b"old", "target": b"new"}
    assert _answer(ctx, db, uuid, _ask(db, uuid)).output == "new"


def test_a_pod_without_the_console_container_answers_not_available(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running", uid="vmi-9")
    cluster.launchers = [_pod("launcher", "vmi-9", logged=False)]
    answer = _answer(ctx, db, uuid, _ask(db, uuid))
    assert (answer.output, answer.error) == (None, console_rows.NOT_AVAILABLE)
    assert not [c for c in cluster.calls if c[0] == "pod_log"]


def test_a_guest_whose_pod_does_not_run_yet_or_whose_log_is_gone_has_an_empty_console(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running", uid="vmi-9")
    cluster.launchers = [_pod("launcher", "vmi-9", phase="Pending")]
    assert (_answer(ctx, db, uuid, _ask(db, uuid)).output) == ""
    cluster.launchers = [_pod("launcher", "vmi-9")]  # running, its log not readable (None)
    assert (_answer(ctx, db, uuid, _ask(db, uuid)).output) == ""


def test_a_cluster_error_is_the_answer_not_an_exception(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running", uid="vmi-9")
    cluster.launchers = [_pod("launcher", "vmi-9")]
    cluster.fail = httpx2.ConnectError("refused")
    answer = _answer(ctx, db, uuid, _ask(db, uuid))
    assert answer.output is None and answer.error == "cluster: refused"


def test_without_a_pending_request_the_cluster_is_not_asked(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running", uid="vmi-9")
    cluster.launchers = [_pod("launcher", "vmi-9")]
    assert console.run(ctx, ServerRow(1, uuid, ops.CONSOLE_OUTPUT, {}), None) is DONE
    assert cluster.calls == []
