"""The real openstack CLI and openstacksdk, with Keystone tokens, through a generated clouds.yaml.

Acceptance scenario 1 of the flavor scenarios (an administrator publishes a private flavor
with extra specs): flavor create --private, set --property, set --project, show,
list --all, unset, delete; flavor access; extra specs; and what a member of the project on
the access list and a member of another project then see. Run only by scripts/conformance
(see conftest.py), which puts the CLI and openstacksdk in the venv this runs from.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import uuid

import pytest


def _openstack_bin(conformance) -> str:
    for candidate in (
        pathlib.Path(conformance.bin) / "openstack" if conformance.bin else None,
        pathlib.Path(sys.executable).parent / "openstack",
    ):
        if candidate and candidate.exists():
            return str(candidate)
    pytest.skip("the openstack CLI is not installed next to this interpreter")


class Cli:
    def __init__(self, conformance, cloud: str) -> None:
        self.exe = _openstack_bin(conformance)
        self.cloud = cloud
        self.env = dict(os.environ, OS_CLIENT_CONFIG_FILE=conformance.clouds_file,
                        PYTHONWARNINGS="ignore")
        for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_TOKEN", "OS_USERNAME", "OS_PASSWORD"):
            self.env.pop(name, None)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [self.exe, "--os-cloud", self.cloud, *args]
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(cmd[1:])} exited {proc.returncode}:\n{proc.stderr[-1500:]}")
        return proc

    def json(self, *args: str):
        return json.loads(self.run(*args, "-f", "json").stdout)


def _props(flavor_json) -> dict:
    props = flavor_json.get("properties") or {}
    if isinstance(props, str):  # older CLIs print "k='v', k2='v2'"
        out = {}
        for part in filter(None, (p.strip() for p in props.split(","))):
            k, _, v = part.partition("=")
            out[k.strip()] = v.strip().strip("'")
        return out
    return props


def test_cli_admin_publishes_a_private_flavor(conformance):
    admin = Cli(conformance, "conformance-admin")
    member = Cli(conformance, "conformance-demo-member")
    other = Cli(conformance, "conformance-alt-member")
    demo_id = conformance.project_id("demo")
    fid = f"okc-cli-{uuid.uuid4().hex[:8]}"
    name = f"{fid}-name"

    created = admin.json("flavor", "create", "--id", fid, "--ram", "1024", "--vcpus", "2",
                         "--disk", "10", "--private", name)
    assert created["id"] == fid and created["name"] == name
    assert created["os-flavor-access:is_public"] is False
    assert (created["ram"], created["vcpus"], created["disk"]) == (1024, 2, 10)
    try:
        admin.run("flavor", "set", "--property", "hw:cpu_policy=dedicated",
                  "--property", "hw:numa_nodes=1", fid)
        admin.run("flavor", "set", "--project", "demo", "--project-domain", "Default", fid)

        shown = admin.json("flavor", "show", fid)
        assert _props(shown) == {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "1"}
        assert shown["access_project_ids"] == [demo_id]
        assert shown["os-flavor-access:is_public"] is False

        # the admin's default list is public flavors only; --all adds the private ones
        assert fid not in {f["ID"] for f in admin.json("flavor", "list")}
        assert fid in {f["ID"] for f in admin.json("flavor", "list", "--all")}
        assert fid in {f["ID"] for f in admin.json("flavor", "list", "--private")}

        # a member of the project on the access list sees it; another project does not
        assert fid in {f["ID"] for f in member.json("flavor", "list")}
        assert member.json("flavor", "show", fid)["name"] == name
        missing = other.run("flavor", "show", fid, check=False)
        assert missing.returncode != 0, missing.stdout
        assert fid not in {f["ID"] for f in other.json("flavor", "list", "--all")}

        # members may not change flavors (Nova's default policy: admin only)
        denied = member.run("flavor", "set", "--property", "hw:numa_nodes=2", fid, check=False)
        assert denied.returncode != 0
        denied = member.run("flavor", "create", "--ram", "64", "--vcpus", "1", "--disk", "0",
                            f"{fid}-by-member", check=False)
        assert denied.returncode != 0
        assert "403" in denied.stderr or "olicy" in denied.stderr, denied.stderr

        admin.run("flavor", "unset", "--property", "hw:numa_nodes", fid)
        admin.run("flavor", "unset", "--project", "demo", "--project-domain", "Default", fid)
        shown = admin.json("flavor", "show", fid)
        assert _props(shown) == {"hw:cpu_policy": "dedicated"}
        assert shown["access_project_ids"] == []
        missing = member.run("flavor", "show", fid, check=False)
        assert missing.returncode != 0, "access removed: the member must not see it any more"
    finally:
        admin.run("flavor", "delete", fid, check=False)
    gone = admin.run("flavor", "show", fid, check=False)
    assert gone.returncode != 0, gone.stdout


@pytest.fixture(scope="module")
def sdk(conformance):
    import openstack  # noqa: PLC0415

    openstack.enable_logging(debug=False)

    def connect(cloud):
        return openstack.connect(cloud=cloud, load_envvars=False)

    return connect


def test_sdk_flavor_lifecycle(conformance, sdk):
    from openstack import exceptions  # noqa: PLC0415

    admin = sdk("conformance-admin")
    member = sdk("conformance-demo-member")
    other = sdk("conformance-alt-member")
    demo_id = conformance.project_id("demo")
    fid = f"okc-sdk-{uuid.uuid4().hex[:8]}"

    f = admin.compute.create_flavor(id=fid, name=fid, ram=512, vcpus=1, disk=1, is_public=False,
                                    description="created by openstacksdk")
    try:
        assert f.id == fid and f.is_public is False
        specs = admin.compute.create_flavor_extra_specs(f, {"hw:cpu_policy": "dedicated",
                                                            "hw:numa_nodes": "1"})
        assert specs.extra_specs == {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "1"}
        assert admin.compute.get_flavor_extra_specs_property(f, "hw:cpu_policy") == "dedicated"
        assert admin.compute.update_flavor_extra_specs_property(f, "hw:numa_nodes", "2") == "2"
        admin.compute.delete_flavor_extra_specs_property(f, "hw:numa_nodes")
        assert admin.compute.fetch_flavor_extra_specs(f).extra_specs == {"hw:cpu_policy": "dedicated"}

        admin.compute.flavor_add_tenant_access(f, demo_id)
        access = admin.compute.get_flavor_access(f)
        assert [(a["flavor_id"], a["tenant_id"]) for a in access] == [(fid, demo_id)]
        assert fid in {x.id for x in admin.compute.flavors(is_public=None)}
        assert fid not in {x.id for x in admin.compute.flavors()}

        got = member.compute.get_flavor(fid)
        assert got.name == fid and got.ram == 512
        assert fid in {x.id for x in member.compute.flavors()}
        with pytest.raises(exceptions.NotFoundException):
            other.compute.get_flavor(fid)
        with pytest.raises(exceptions.ForbiddenException):
            member.compute.create_flavor(name=f"{fid}-m", ram=64, vcpus=1, disk=0)
        with pytest.raises(exceptions.ForbiddenException):
            member.compute.create_flavor_extra_specs(f, {"hw:numa_nodes": "1"})

        updated = admin.compute.update_flavor(f, description="updated by openstacksdk")
        assert updated.description == "updated by openstacksdk"

        # the cloud layer (what ansible and friends use)
        assert admin.get_flavor_by_id(fid).id == fid
        assert fid in {x.id for x in admin.list_flavors(get_extra=True)}

        admin.compute.flavor_remove_tenant_access(f, demo_id)
        assert admin.compute.get_flavor_access(f) == []
        with pytest.raises(exceptions.NotFoundException):
            member.compute.get_flavor(fid)
    finally:
        admin.compute.delete_flavor(fid, ignore_missing=True)
    with pytest.raises(exceptions.NotFoundException):
        admin.compute.get_flavor(fid)
