"""Nova's network checks against a real Neutron 29 (neutron-up.sh): set OPENKEEL_TEST_NEUTRON_DIR to the
recipe's OKC_SERVICES_DIR (harness/keystone.env and networks.env in it). The caller is Keystone's demo
user with a real token; the [neutron] credential is the nova service user, as a deployment sets it."""

from __future__ import annotations

import os
import pathlib
import types
import uuid

import pytest

from openkeel_compute.network import client as client_mod
from openkeel_compute.network import errors, validate
from tests.conftest import make_conf

DIR = os.environ.get("OPENKEEL_TEST_NEUTRON_DIR")
pytestmark = pytest.mark.skipif(not DIR, reason="no real Neutron: set OPENKEEL_TEST_NEUTRON_DIR to a neutron-up.sh "
                                "services dir (harness/keystone.env, networks.env)")


def _env(path: pathlib.Path) -> dict:
    values = {}
    for line in path.read_text().splitlines():
        for word in line.removeprefix("export ").split():
            if "=" in word:
                key, value = word.split("=", 1)
                values[key] = value.strip("'\"")
    return values


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    base = pathlib.Path(DIR)
    ks, nets = _env(base / "harness" / "keystone.env"), _env(base / "networks.env")
    conf = make_conf(tmp_path_factory.mktemp("real-neutron"), neutron={
        "auth_type": "password", "auth_url": ks["KEYSTONE_URL"], "username": ks["SERVICE_USERNAME"],
        "password": ks["SERVICE_PASSWORD"], "project_name": ks.get("SERVICE_PROJECT_NAME", "service"),
        "user_domain_name": "Default", "project_domain_name": "Default", "region_name": "RegionOne"})
    from keystoneauth1 import session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=ks["KEYSTONE_URL"], username=ks["DEMO_USERNAME"], password=ks["DEMO_PASSWORD"],
                       project_name=ks.get("DEMO_PROJECT_NAME", "demo"), user_domain_name="Default",
                       project_domain_name="Default")
    sess = session.Session(auth=auth)
    token, project = sess.get_token(), sess.get_project_id()
    context = types.SimpleNamespace(auth_token=token, project_id=project, is_admin=False,
                                    environ={"keystone.token_auth": auth})
    client = client_mod.NeutronClient(conf)
    return types.SimpleNamespace(conf=conf, caller=client.for_caller(context), admin=client.admin(),
                                 project=project, private=nets["PRIVATE_NETWORK_ID"], created=[])


def _make(real, kind: str, body: dict) -> dict:
    made = real.admin.request("POST", f"/{kind}s", body={kind: body}, ok=(201,))[kind]
    real.created.append((kind, made["id"]))
    return made


@pytest.fixture(autouse=True)
def _cleanup(real):
    yield
    for kind, ident in reversed(real.created):
        real.admin.request("DELETE", f"/{kind}s/{ident}", ok=(204, 404))
    real.created.clear()


def test_shared_network_and_auto(real):
    assert validate.validate_networks(real.caller, real.project, [{"uuid": real.private}], 3) == 3
    assert validate.validate_networks(real.caller, real.project, "auto", 1) == 1


def test_unknown_network_and_port(real):
    unknown = str(uuid.uuid4())
    with pytest.raises(errors.NetworkNotFound):
        validate.validate_networks(real.caller, real.project, [{"uuid": unknown}], 1)
    with pytest.raises(errors.PortNotFound):
        validate.validate_networks(real.caller, real.project, [{"port": unknown}], 1)


def test_ports_in_use_free_and_fixed_ip(real):
    free = _make(real, "port", {"network_id": real.private, "project_id": real.project})
    requested = [{"port": free["id"]}]
    assert validate.validate_networks(real.caller, real.project, requested, 1) == 1
    assert requested[0]["uuid"] == real.private
    used = _make(real, "port", {"network_id": real.private, "project_id": real.project, "device_id": "srv-1",
                                "device_owner": "compute:nova"})
    with pytest.raises(errors.PortInUse):
        validate.validate_networks(real.caller, real.project, [{"port": used["id"]}], 1)
    address = used["fixed_ips"][0]["ip_address"]
    with pytest.raises(errors.FixedIpAlreadyInUse) as caught:
        validate.validate_networks(real.caller, real.project, [{"uuid": real.private, "fixed_ip": address}], 1)
    assert caught.value.message == f"Fixed IP address {address} is already in use on instance srv-1."


def test_own_network_without_subnet_and_ambiguity(real):
    own = _make(real, "network", {"name": "okc-nosubnet", "project_id": real.project})
    with pytest.raises(errors.NetworkRequiresSubnet):
        validate.validate_networks(real.caller, real.project, [{"uuid": own["id"]}], 1)
    with pytest.raises(errors.NetworkAmbiguous):  # its own network beside the shared one
        validate.validate_networks(real.caller, real.project, "auto", 1)


def test_security_groups(real):
    assert validate.security_groups(real.caller, real.project, ["default"]) == ["default"]
    group = _make(real, "security_group", {"name": "okc-web", "project_id": real.project})
    assert validate.security_groups(real.caller, real.project, ["okc-web", group["id"]]) == [group["id"]] * 2
    with pytest.raises(errors.SecurityGroupNotFound) as caught:
        validate.security_groups(real.caller, real.project, ["okc-none"])
    assert caught.value.message == "Unable to find security_group with name or id 'okc-none'"


def test_port_quota(real):
    real.admin.request("PUT", f"/quotas/{real.project}", body={"quota": {"port": 1}})
    try:
        _make(real, "port", {"network_id": real.private, "project_id": real.project})
        with pytest.raises(errors.PortLimitExceeded):
            validate.max_for_quota(
                validate.validate_networks(real.caller, real.project, [{"uuid": real.private}], 1), 1, 1)
    finally:
        real.admin.request("DELETE", f"/quotas/{real.project}", ok=(204,))
