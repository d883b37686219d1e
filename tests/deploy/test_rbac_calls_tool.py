"""tools/rbac_calls.py's own parts: what it keeps of the audit log, and which tests it runs again."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.deploy.conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import rbac_calls


def _line(verb, resource, namespace, agent="openkeel-compute-controller/0.1.0", group="", sub=None):
    return json.dumps({"verb": verb, "apiGroup": group, "resource": resource, "subresource": sub,
                       "namespace": namespace, "name": None, "userAgent": agent, "code": 200})


def test_only_the_controllers_calls_are_kept_once_each_with_their_scope():
    lines = [
        _line("get", "leases", "default", group="coordination.k8s.io"),
        _line("get", "leases", "default", group="coordination.k8s.io"),
        _line("create", "virtualmachines", "project-a", group="kubevirt.io"),
        _line("list", "nodes", None),
        _line("delete", "secrets", "project-a", agent="python-httpx/0.27"),  # a test's own client
        "",
    ]
    assert rbac_calls.aggregate(lines) == [
        {"verb": "list", "apiGroup": "", "resource": "nodes", "subresource": None, "scope": "cluster"},
        {"verb": "get", "apiGroup": "coordination.k8s.io", "resource": "leases", "subresource": None,
         "scope": "own"},
        {"verb": "create", "apiGroup": "kubevirt.io", "resource": "virtualmachines", "subresource": None,
         "scope": "project"},
    ]


def test_the_failed_tests_of_a_report_are_node_ids_pytest_selects(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.deploy.test_rbac" name="test_no_rule_is_unused[dev]">'
        '<failure message="boom"/></testcase>'
        '<testcase classname="tests.deploy.test_rbac" name="test_the_record_holds_verbs_and_scopes_rbac_knows"/>'
        '<testcase classname="tests.deploy.test_rbac" name="test_the_lease_is_the_only_thing_in_the_controllers_namespace">'
        '<error message="setup"/></testcase>'
        '</testsuite></testsuites>')
    failed = rbac_calls.failed_tests(report)
    assert failed == ["tests/deploy/test_rbac.py::test_no_rule_is_unused[dev]",
                      "tests/deploy/test_rbac.py::test_the_lease_is_the_only_thing_in_the_controllers_namespace"]
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=",
                                "-p", "no:cacheprovider", *failed], cwd=ROOT, capture_output=True, text=True,
                               check=False)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert [line for line in collected.stdout.splitlines() if "::" in line] == failed


def test_a_report_that_names_no_module_of_the_tree_gives_nothing_to_retry(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text('<testsuites><testsuite><testcase classname="elsewhere.test_x" name="test_y">'
                      '<failure/></testcase></testsuite></testsuites>')
    assert rbac_calls.failed_tests(report) is None
    assert rbac_calls.failed_tests(tmp_path / "absent.xml") is None


def test_the_console_proxys_calls_are_told_apart_by_its_user_agent():
    from openkeel_compute.consoles import upstream

    vnc = _line("get", "virtualmachineinstances", "project-a", agent=upstream.USER_AGENT,
                group="subresources.kubevirt.io", sub="vnc")
    controller = _line("list", "nodes", None)
    assert rbac_calls.aggregate([vnc, controller], rbac_calls.COMPONENTS["console-proxy"][0]) == [
        {"verb": "get", "apiGroup": "subresources.kubevirt.io", "resource": "virtualmachineinstances",
         "subresource": "vnc", "scope": "project"}]
    assert rbac_calls.aggregate([vnc]) == []  # not the controller's
