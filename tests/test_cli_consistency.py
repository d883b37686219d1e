"""The openkeel-compute command line says what it does and does what it says (issue: CLI consistency)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.cmd.main import main
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import make_conf

EXE = str(Path(sys.executable).parent / "openkeel-compute")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _cli(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([EXE, *argv], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def synced(tmp_path):
    conf = make_conf(tmp_path)
    migration.sync(db_api.get_engine(conf))
    yield conf, conf.config_file[0]
    db_api.dispose_all()


def _create(conf, flavorid: str) -> None:
    with db_api.transaction(db_api.get_engine(conf)) as conn:
        catalog.create(conn, name=flavorid, memory_mb=512, vcpus=1, root_gb=1, flavorid=flavorid, is_public=True,
                       description=None)


@pytest.mark.parametrize("group", ["flavor", "controller"])
def test_status_of_an_unknown_flavor_is_an_error_not_in_sync(synced, tmp_path, capsys, group):
    _conf, path = synced
    status, out, err = _run(capsys, group, "status", "--config-file", path, "--render", str(tmp_path / "r"),
                            "no-such-flavor")
    assert (status, out) == (1, "")
    assert err.splitlines()[-1] == ("error: no flavor no-such-flavor: not in the catalogue, and no KubeVirt "
                                    "objects of it")


def test_controller_status_honours_render_given_before_status(synced, tmp_path, capsys):
    conf, path = synced
    _create(conf, "m1")
    rendered = tmp_path / "rendered"
    assert main(["controller", "--config-file", path, "--render", str(rendered), "--once"]) == 0
    capsys.readouterr()
    status, out, _ = _run(capsys, "controller", "--config-file", path, "--render", str(rendered), "status")
    assert status == 0 and "in-sync" in out, out
    # and the same options after "status" still work
    status, out, _ = _run(capsys, "controller", "status", "--config-file", path, "--render", str(rendered))
    assert status == 0 and "in-sync" in out, out
    # an empty directory given before "status" is really the one looked at
    status, out, _ = _run(capsys, "controller", "--config-file", path, "--render", str(tmp_path / "empty"),
                          "status")
    assert status == 1 and "out-of-sync" in out, out


def test_a_missing_object_is_said_once(synced, tmp_path, capsys):
    conf, path = synced
    _create(conf, "m1")
    status, out, _ = _run(capsys, "flavor", "status", "--config-file", path, "--render", str(tmp_path / "r"))
    assert status == 1 and ": missing" in out and "missing (missing)" not in out, out


def test_outside_a_checkout_no_database_is_created(tmp_path):
    for argv in (["db", "version"], ["flavor", "status"], ["controller", "status"], ["controller", "--once"]):
        got = _cli(tmp_path, *argv)
        assert got.returncode == 1, (argv, got.stderr)
        lines = got.stderr.strip().splitlines()
        expected_db = f"sqlite:///{tmp_path}/var/openkeel.sqlite"
        assert lines[0] == f"database: {expected_db}", (argv, lines)
        assert lines[-1].startswith(f"error: no database at {tmp_path}/var/openkeel.sqlite: run "
                                    "'openkeel-compute db sync'"), (argv, lines)
        assert "Traceback" not in got.stderr
        assert not (tmp_path / "var").exists(), argv
    synced = _cli(tmp_path, "db", "sync")
    assert synced.returncode == 0 and (tmp_path / "var/openkeel.sqlite").exists(), synced.stderr
    assert synced.stderr.startswith(f"database: sqlite:///{tmp_path}/var/openkeel.sqlite\n")
    version = _cli(tmp_path, "db", "version")
    assert version.returncode == 0 and version.stdout.strip() not in ("", "None"), version


def test_the_database_url_is_shown_without_its_password(tmp_path):
    conf = tmp_path / "pg.conf"
    conf.write_text("[database]\nconnection = postgresql+psycopg://nova:s3cret-pw@127.0.0.1:9/nova\n")
    got = _cli(tmp_path, "db", "version", "--config-file", str(conf))
    assert got.stderr.splitlines()[0] == "database: postgresql+psycopg://nova:***@127.0.0.1:9/nova"
    assert "s3cret-pw" not in got.stderr + got.stdout


OSC_SHOW = {  # `openstack flavor show -f json m1.dedicated`, as python-openstackclient 10.5 prints it
    "OS-FLV-DISABLED:disabled": None, "OS-FLV-EXT-DATA:ephemeral": 0, "access_project_ids": ["demo"],
    "description": "two dedicated vCPUs", "disk": 10, "id": "42", "name": "m1.dedicated",
    "os-flavor-access:is_public": False, "properties": {"hw:cpu_policy": "dedicated"}, "ram": 1024,
    "rxtx_factor": None, "swap": 0, "vcpus": 2,
}


def test_explain_reads_openstack_flavor_show_json(tmp_path, capsys):
    path = tmp_path / "m1.json"
    path.write_text(json.dumps(OSC_SHOW))
    status, out, err = _run(capsys, "flavor", "explain", str(path))
    assert (status, err) == (0, "")
    assert out.startswith("flavor 42 (m1.dedicated)")
    assert any(line.startswith("hw:cpu_policy") and "dedicated" in line for line in out.splitlines()), out
    status, out, err = _run(capsys, "flavor", "convert", str(path))
    docs = out.split("\n---\n")
    assert status == 0 and "dedicatedCPUPlacement: true" in out and len(docs) == 2  # one project: demo
    assert all("namespace:" in doc for doc in docs)


def test_explain_says_when_a_body_has_no_extra_specs(tmp_path, capsys):
    body = {"flavor": {k: v for k, v in OSC_SHOW.items()
                       if k not in ("properties", "access_project_ids", "OS-FLV-DISABLED:disabled", "rxtx_factor")}
            | {"links": [{"rel": "self", "href": "http://127.0.0.1:8774/v2.1/flavors/42"}]}}
    path = tmp_path / "pre-2.61.json"
    path.write_text(json.dumps(body))
    status, out, err = _run(capsys, "flavor", "explain", str(path))
    assert status == 0 and out.startswith("flavor 42")
    del body["flavor"]["links"]  # hand-written: a flavor without extra specs, nothing to say
    path.write_text(json.dumps(body))
    assert _run(capsys, "flavor", "explain", str(path))[2] == ""
    assert err.splitlines() == [
        ("warning: flavor 42: no extra_specs in the body (the API shows them from microversion 2.61; openstack "
        "flavor show, or flavor list --long, shows them as properties): taken as a flavor without extra specs")]


def test_import_instancetypes_refuses_a_file_without_instancetypes(tmp_path, capsys):
    path = tmp_path / "flavor.json"
    path.write_text(json.dumps({"flavor": OSC_SHOW}))
    status, out, err = _run(capsys, "flavor", "import-instancetypes", str(path))
    assert (status, out) == (1, "")
    assert err.splitlines() == [
        (f"error: {path}: no VirtualMachineClusterInstancetype or VirtualMachineInstancetype in it; kinds found: "
        "no kind (a flavor? 'flavor convert' reads flavors)")]


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"openkeel-compute {importlib.metadata.version('openkeel-compute')}\n"


def test_top_level_help_is_plain_text(tmp_path):
    got = _cli(tmp_path, "--help")
    assert got.returncode == 0
    assert "``" not in got.stdout and ":func:" not in got.stdout
    assert "OpenKeel compute: the OpenStack compute (Nova) API with KubeVirt as the hypervisor." in " ".join(
        got.stdout.split())


def test_no_status_reason_repeats_itself():
    from openkeel_compute.controller.desired import NAMESPACE, ObjectKey
    from openkeel_compute.controller.plan import APPLY, CREATE, DELETE, Action
    from openkeel_compute.controller.status import _action_text

    ns = ObjectKey(NAMESPACE, None, "proj-a")
    it = ObjectKey("VirtualMachineClusterInstancetype", None, "m1")
    assert _action_text(Action(CREATE, ns, {}, None, "namespace missing")).endswith(": namespace missing")
    assert _action_text(Action(CREATE, it, {}, None, "missing")).endswith(": missing")
    assert _action_text(Action(APPLY, it, {}, {}, "spec.cpu")).endswith(": differs (spec.cpu)")
    assert _action_text(Action(DELETE, it, None, {}, "no flavor wants it")).endswith(
        ": left over from a deleted flavor or project (no flavor wants it)")


OSC_LIST_LONG = [  # `openstack flavor list --long -f json`
    {"ID": "42", "Name": "m1.dedicated", "RAM": 1024, "Disk": 10, "Ephemeral": 0, "VCPUs": 2, "Is Public": True,
     "Swap": 0, "RXTX Factor": None, "Properties": {"hw:cpu_policy": "dedicated"}},
]


def test_explain_reads_openstack_flavor_list_json(tmp_path, capsys):
    path = tmp_path / "list.json"
    path.write_text(json.dumps(OSC_LIST_LONG))
    status, out, err = _run(capsys, "flavor", "explain", str(path))
    assert (status, err) == (0, "")
    assert out.startswith("flavor 42 (m1.dedicated)") and "\nhw:cpu_policy " in out, out
    short = [{k: v for k, v in row.items() if k not in ("Swap", "RXTX Factor", "Properties")} for row in OSC_LIST_LONG]
    path.write_text(json.dumps(short))
    status, out, err = _run(capsys, "flavor", "explain", str(path))
    assert status == 0 and out.startswith("flavor 42 (m1.dedicated)")
    assert err.startswith("warning: flavor 42: no extra_specs in the body"), err
