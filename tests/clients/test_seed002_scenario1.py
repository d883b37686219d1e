"""Seed 002, scenario 1 with real clients: an administrator publishes a private flavor with extra specs.

The real ``openstack`` CLI (python-openstackclient) and openstacksdk talk to a real
``openkeel-compute serve`` (conftest.py) with the noauth2 token ``admin:admin`` and an endpoint
override (../shared/reference/clients.md). Each test asserts on what the client printed or
returned and, independently, on the resulting state read back over plain HTTP, including what a
member of the granted project (``demo:demo``) and of another project (``other:other``) see.

The CLI's ``flavor create``/``set``/``unset`` need an identity v3 endpoint before they send
anything to compute; under noauth2 the server answers those project look-ups itself at
``/identity/v3`` (api/noauth_identity.py), as scripts/serve's clouds.yaml uses it.
A CLI start costs seconds, so the steps whose outcome is checked through the API or stderr
share interactive sessions (commands on stdin); create, set and unset run one process each so
that their exit codes are asserted.
"""

from __future__ import annotations

import pytest

from tests.clients.cli import COMPUTE_VERSION, Cli


def _ids(flavors) -> set[str]:
    return {f["id"] for f in flavors}


@pytest.fixture(scope="module")
def cli(server, tmp_path_factory):
    return Cli(server, tmp_path_factory.mktemp("cli"))


def test_cli_publishes_a_private_flavor_with_extra_specs(cli, server):
    api = server.api
    fid = "cli-s1"

    # 1. POST /flavors with os-flavor-access:is_public false
    created = cli.ok("flavor", "create", "--private", "--id", fid, "--ram", "512", "--vcpus", "1",
                     "--disk", "1", "--description", "seed 002 scenario 1", fid, "-f", "json")
    assert created["id"] == fid and created["name"] == fid
    assert (created["ram"], created["vcpus"], created["disk"]) == (512, 1, 1)
    assert created["os-flavor-access:is_public"] is False
    assert created["description"] == "seed 002 scenario 1"
    assert created["properties"] == {}
    status, body = api.get(f"/flavors/{fid}")
    assert status == 200 and body["flavor"]["os-flavor-access:is_public"] is False
    assert body["flavor"]["extra_specs"] == {}
    assert api.get(f"/flavors/{fid}", token="demo:demo")[0] == 404  # private, not granted yet
    assert api.get(f"/flavors/{fid}/os-flavor-access")[1] == {"flavor_access": []}

    # 2. os-extra_specs (validated at 2.86) and addTenantAccess, in one `flavor set`
    assert cli.ok("flavor", "set", "--property", "hw:cpu_policy=dedicated",
                  "--property", "hw:mem_page_size=large", "--project", "demo", fid) is None
    assert api.get(f"/flavors/{fid}/os-extra_specs")[1] == {
        "extra_specs": {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "large"}}
    assert api.get(f"/flavors/{fid}/os-flavor-access")[1] == {
        "flavor_access": [{"flavor_id": fid, "tenant_id": "demo"}]}
    status, body = api.get(f"/flavors/{fid}", token="demo:demo")
    assert status == 200 and body["flavor"]["extra_specs"]["hw:cpu_policy"] == "dedicated"
    assert fid in _ids(api.get("/flavors", token="demo:demo")[1]["flavors"])
    assert fid not in _ids(api.get("/flavors", token="other:other")[1]["flavors"])

    # 3. the refusals of the scenario as the CLI reports them (an invalid value: 400 with Nova's
    #    validator message; a flavor id already used: 409), then what the administrator reads
    #    back with flavor show and flavor list --all; one CLI session
    (shown, listed, listed_public), err = cli.session(
        f"flavor set --property hw:cpu_policy=bogus {fid}",
        f"flavor create --id {fid} --ram 1 --vcpus 1 --disk 0 other-name -f json",
        f"flavor show {fid} -f json", "flavor list --all --long -f json", "flavor list -f json")
    assert "Validation failed; 'bogus' is not one of: dedicated, shared, mixed." in err
    assert f"Flavor with ID {fid} already exists." in err
    assert api.get(f"/flavors/{fid}/os-extra_specs/hw:cpu_policy")[1] == {"hw:cpu_policy": "dedicated"}
    assert "other-name" not in {f["name"] for f in api.get("/flavors?is_public=None")[1]["flavors"]}
    assert shown["id"] == fid and shown["os-flavor-access:is_public"] is False
    assert shown["properties"] == {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "large"}
    assert shown["access_project_ids"] == ["demo"]
    assert shown["description"] == "seed 002 scenario 1"
    row = next(r for r in listed if r["ID"] == fid)
    assert row["Is Public"] is False and row["RAM"] == 512 and row["VCPUs"] == 1
    assert row["Properties"] == {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "large"}
    assert fid not in {r["ID"] for r in listed_public}  # an admin's default list is public only
    assert {r["ID"] for r in listed} == _ids(api.get("/flavors?is_public=None")[1]["flavors"])

    # 5. flavor unset: one extra spec and the project's access go away
    assert cli.ok("flavor", "unset", "--property", "hw:mem_page_size", "--project", "demo", fid) is None
    assert api.get(f"/flavors/{fid}/os-extra_specs")[1] == {"extra_specs": {"hw:cpu_policy": "dedicated"}}
    assert api.get(f"/flavors/{fid}/os-flavor-access")[1] == {"flavor_access": []}
    assert api.get(f"/flavors/{fid}", token="demo:demo")[0] == 404
    assert api.get(f"/flavors/{fid}/os-extra_specs/hw:mem_page_size")[0] == 404

    # 6. flavor delete, then the CLI and the API agree that it is gone (one CLI session)
    (remaining,), err = cli.session(f"flavor delete {fid}", "flavor list --all -f json",
                                    f"flavor show {fid} -f json")
    assert api.get(f"/flavors/{fid}")[0] == 404
    assert fid not in {r["ID"] for r in remaining}
    assert f"No Flavor found for {fid}" in err
    assert "Failed to delete" not in err


def test_sdk_publishes_a_private_flavor_with_extra_specs(server):
    openstack = pytest.importorskip("openstack")
    from openstack import exceptions as sdk_exc

    api = server.api

    def connect(token: str):
        return openstack.connect(auth_type="admin_token", auth={"token": token, "endpoint": server.url},
                                 compute_endpoint_override=server.url, compute_api_version=COMPUTE_VERSION,
                                 load_yaml_config=False, load_envvars=False)

    admin, member, outsider = connect("admin:admin"), connect("demo:demo"), connect("other:other")
    fid = "sdk-s1"

    f = admin.compute.create_flavor(name=fid, ram=512, vcpus=2, disk=1, id=fid, is_public=False,
                                    description="created by openstacksdk")
    assert (f.id, f.name, f.ram, f.vcpus, f.disk, f.is_public) == (fid, fid, 512, 2, 1, False)
    assert f.description == "created by openstacksdk"
    assert api.get(f"/flavors/{fid}")[1]["flavor"]["os-flavor-access:is_public"] is False
    with pytest.raises(sdk_exc.ConflictException, match=f"Flavor with ID {fid} already exists."):
        admin.compute.create_flavor(name="another", ram=1, vcpus=1, disk=0, id=fid)

    specs = admin.compute.create_flavor_extra_specs(f, {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "1"})
    assert specs.extra_specs == {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "1"}
    with pytest.raises(sdk_exc.BadRequestException, match="Validation failed; 'bogus' is not one of"):
        admin.compute.create_flavor_extra_specs(f, {"hw:cpu_policy": "bogus"})
    with pytest.raises(sdk_exc.BadRequestException,
                       match="Validation failed; extra spec 'hw:no_such_thing' does not appear"):
        admin.compute.create_flavor_extra_specs(f, {"hw:no_such_thing": "1"})
    assert admin.compute.get_flavor_extra_specs_property(f, "hw:numa_nodes") == "1"
    assert api.get(f"/flavors/{fid}/os-extra_specs")[1] == {
        "extra_specs": {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "1"}}

    assert not any(x.id == fid for x in member.compute.flavors())
    admin.compute.flavor_add_tenant_access(f, "demo")
    assert admin.compute.get_flavor_access(f) == [{"flavor_id": fid, "tenant_id": "demo"}]
    assert api.get(f"/flavors/{fid}/os-flavor-access")[1] == {
        "flavor_access": [{"flavor_id": fid, "tenant_id": "demo"}]}
    with pytest.raises(sdk_exc.ConflictException, match="Flavor access already exists"):
        admin.compute.flavor_add_tenant_access(f, "demo")

    # the member of the granted project sees it (list and show, extra specs included); others do not
    assert any(x.id == fid for x in member.compute.flavors())
    seen = member.compute.get_flavor(fid)
    assert seen.extra_specs == {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "1"}
    assert not any(x.id == fid for x in outsider.compute.flavors())
    with pytest.raises(sdk_exc.NotFoundException):
        outsider.compute.get_flavor(fid)
    with pytest.raises(sdk_exc.ForbiddenException):
        member.compute.create_flavor(name="nope", ram=1, vcpus=1, disk=0)

    assert fid in {x.id for x in admin.compute.flavors(is_public=None)}
    # openstacksdk always sends is_public=None; an admin asking for public ones does not get it
    assert fid not in {x.id for x in admin.compute.flavors(is_public=True)}

    # by id: `f` carries the extra specs set above as dirty attributes, which the SDK would send
    # in the PUT body, and the 2.55 update schema (Nova's too) allows `description` only
    updated = admin.compute.update_flavor(fid, description="updated by openstacksdk")
    assert updated.description == "updated by openstacksdk"
    assert api.get(f"/flavors/{fid}")[1]["flavor"]["description"] == "updated by openstacksdk"
    admin.compute.update_flavor_extra_specs_property(f, "hw:numa_nodes", "2")
    admin.compute.delete_flavor_extra_specs_property(f, "hw:cpu_policy")
    assert api.get(f"/flavors/{fid}/os-extra_specs")[1] == {"extra_specs": {"hw:numa_nodes": "2"}}

    admin.compute.flavor_remove_tenant_access(f, "demo")
    assert admin.compute.get_flavor_access(f) == []
    assert api.get(f"/flavors/{fid}", token="demo:demo")[0] == 404

    admin.compute.delete_flavor(f)
    assert api.get(f"/flavors/{fid}")[0] == 404
    assert admin.compute.find_flavor(fid) is None
    with pytest.raises(sdk_exc.NotFoundException):
        admin.compute.delete_flavor(fid, ignore_missing=False)
