"""The real openstack CLI and openstacksdk, with Keystone tokens, through a generated clouds.yaml.

Acceptance scenario 1 of the flavor scenarios (an administrator publishes a private flavor
with extra specs): flavor create --private, set --property, set --project, show,
list --all, unset, delete; flavor access; extra specs; and what a member of the project on
the access list and a member of another project then see. Run only by scripts/conformance
(see conftest.py), which puts the CLI and openstacksdk in the venv this runs from.
"""

from __future__ import annotations

import concurrent.futures
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
        proc = subprocess.run(cmd, check=False, env=self.env, capture_output=True, text=True, timeout=120)
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


def _parallel(*calls):
    """Run several independent CLI calls at once (each costs seconds of start-up)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(fn, *args) for fn, *args in calls]
        return [f.result() for f in futures]


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
        # extra specs and flavor access in one `flavor set` (the CLI resolves the project
        # name through Keystone with the admin's token)
        admin.run("flavor", "set", "--property", "hw:cpu_policy=dedicated",
                  "--property", "hw:numa_nodes=1", "--project", "demo",
                  "--project-domain", "Default", fid)

        shown, admin_list, admin_all, member_list, other_show, member_create = _parallel(
            (admin.json, "flavor", "show", fid),
            (admin.json, "flavor", "list"),
            (admin.json, "flavor", "list", "--all"),
            (member.json, "flavor", "list"),
            (lambda: other.run("flavor", "show", fid, check=False),),
            (lambda: member.run("flavor", "create", "--ram", "64", "--vcpus", "1", "--disk", "0",
                                f"{fid}-by-member", check=False),),
        )
        assert _props(shown) == {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "1"}
        assert shown["access_project_ids"] == [demo_id]
        assert shown["os-flavor-access:is_public"] is False
        # the cloud admin's project (admin) is not on the access list: its default list is
        # public flavors only; --all adds the private ones
        assert fid not in {f["ID"] for f in admin_list}
        assert fid in {f["ID"] for f in admin_all}
        # a member of the project on the access list sees it; another project does not
        assert fid in {f["ID"] for f in member_list}
        assert other_show.returncode != 0, other_show.stdout
        # members may not create flavors (Nova's default policy: admin only)
        assert member_create.returncode != 0, member_create.stdout
        assert "403" in member_create.stderr or "olicy" in member_create.stderr, member_create.stderr

        admin.run("flavor", "unset", "--property", "hw:numa_nodes", "--project", "demo",
                  "--project-domain", "Default", fid)
        shown, member_show = _parallel(
            (admin.json, "flavor", "show", fid),
            (lambda: member.run("flavor", "show", fid, check=False),),
        )
        assert _props(shown) == {"hw:cpu_policy": "dedicated"}
        assert shown["access_project_ids"] == []
        assert member_show.returncode != 0, "access removed: the member must not see it any more"
    finally:
        admin.run("flavor", "delete", fid, check=False)
    gone = admin.run("flavor", "show", fid, check=False)
    assert gone.returncode != 0, gone.stdout


@pytest.fixture(scope="module")
def sdk(conformance):
    import openstack
    from openstack.config import loader

    config = loader.OpenStackConfig(config_files=[conformance.clouds_file], load_envvars=False)

    def connect(cloud):
        return openstack.connection.Connection(config=config.get_one(cloud=cloud))

    return connect


def test_sdk_flavor_lifecycle(conformance, sdk):
    from openstack import exceptions

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
        # openstacksdk lists with is_public=None by default; ask for public ones explicitly
        assert fid not in {x.id for x in admin.compute.flavors(is_public=True)}

        got = member.compute.get_flavor(fid)
        assert got.name == fid and got.ram == 512
        assert fid in {x.id for x in member.compute.flavors()}
        with pytest.raises(exceptions.NotFoundException):
            other.compute.get_flavor(fid)
        with pytest.raises(exceptions.ForbiddenException):
            member.compute.create_flavor(name=f"{fid}-m", ram=64, vcpus=1, disk=0)
        with pytest.raises(exceptions.ForbiddenException):
            member.compute.create_flavor_extra_specs(f, {"hw:numa_nodes": "1"})

        # by id: the Flavor object fetched at 2.61+ carries extra_specs, which openstacksdk
        # would send back in the PUT body (and Nova rejects with 400)
        updated = admin.compute.update_flavor(fid, description="updated by openstacksdk")
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
