"""Personas on a real Keystone: what each flavor operation gives each kind of caller.

The expectation table is Nova 34.0.0's behaviour with its DEFAULT policies
(nova/policies/flavor_*.py: create/update/delete, extra-spec writes and flavor access are
``context_is_admin``; extra-spec reads are ``project_reader_or_admin``; flavor reads have no
policy but a private flavor is visible only to admins and to projects on its access list).
It was proven against the real nova-api (``scripts/conformance --target nova``) and is the
expectation for OpenKeel (the default target). Run only by the tier (see conftest.py).

Personas (users on the tier's Keystone, see scripts/conformance):
  admin  - demo_admin:  role admin on project demo (the project on the private flavor's access list)
  member - demo_member: role member on project demo
  reader - demo_reader: role reader on project demo
  other  - alt_member:  role member on project alt_demo (not on the access list)
"""

from __future__ import annotations

import uuid

import pytest

PERSONAS = {
    "admin": "conformance-demo-admin",
    "member": "conformance-demo-member",
    "reader": "conformance-demo-reader",
    "other": "conformance-alt-member",
}
ALL = tuple(PERSONAS)


def _all(status):
    return {p: status for p in ALL}


def _admin_only(ok, denied=403):
    return {"admin": ok, "member": denied, "reader": denied, "other": denied}


# operation -> expected HTTP status per persona (Nova 34.0.0, default policies)
STATUS = {
    "list flavors": _all(200),
    "list flavors detail": _all(200),
    "show public flavor": _all(200),
    "show private flavor": {"admin": 200, "member": 200, "reader": 200, "other": 404},
    "create flavor": _admin_only(200),
    "update flavor description (2.55)": _admin_only(200),
    "delete flavor": _admin_only(202),
    "list extra specs of public flavor": _all(200),
    "list extra specs of private flavor": {"admin": 200, "member": 200, "reader": 200, "other": 404},
    "show extra spec of private flavor": {"admin": 200, "member": 200, "reader": 200, "other": 404},
    "create extra specs": _admin_only(200),
    "update extra spec": _admin_only(200),
    "delete extra spec": _admin_only(200),
    "list flavor access": _admin_only(200),
    "add tenant access": _admin_only(200),
    "remove tenant access": _admin_only(200),
    "add access for a project Keystone does not know": _admin_only(400),
}

# question -> expected answer per persona
# Note the admin column: Nova's default list (is_public=True) still adds the flavors shared
# with the caller's own project, for admins too, and demo_admin's project is on the access
# list. (A cloud admin in a project NOT on the list does not see it without ?is_public=None:
# test_clients.py checks that with the admin of project admin.)
VISIBLE = {
    "private flavor in GET /flavors": {"admin": True, "member": True, "reader": True, "other": False},
    "private flavor in GET /flavors/detail": {"admin": True, "member": True, "reader": True, "other": False},
    "private flavor in GET /flavors?is_public=None": {
        "admin": True, "member": True, "reader": True, "other": False},
    "extra_specs in the flavor body at 2.61": _all(True),
}


class Api:
    """A keystoneauth1 session for one persona, talking to the compute URL of the tier."""

    def __init__(self, conformance, cloud: str) -> None:
        from keystoneauth1 import session
        from keystoneauth1.identity import v3

        auth = dict(conformance.clouds[cloud]["auth"])
        self.session = session.Session(auth=v3.Password(**auth))
        self.base = conformance.compute_url

    def __call__(self, method: str, path: str, body=None, mv: str = "2.1"):
        headers = {"OpenStack-API-Version": f"compute {mv}", "Accept": "application/json"}
        resp = self.session.request(
            self.base + path, method, json=body, headers=headers, raise_exc=False,
            connect_retries=1,
        )
        return resp


def _check_fault(resp):
    """Non-2xx answers carry Nova's fault body: {"<name>": {"code": N, "message": "..."}}."""
    if resp.status_code < 400:
        return
    body = resp.json()
    assert len(body) == 1, body
    (fault,) = body.values()
    assert fault.get("code") == resp.status_code, body
    assert isinstance(fault.get("message"), str) and fault["message"], body


@pytest.fixture(scope="module")
def admin(conformance):
    return Api(conformance, "conformance-admin")


@pytest.fixture(scope="module")
def world(conformance, admin):
    """A public and a private flavor (with extra specs); the private one is shared with demo."""
    tag = uuid.uuid4().hex[:8]
    ids = {}
    for kind, public in (("public", True), ("private", False)):
        fid = f"okc-persona-{kind}-{tag}"
        r = admin("POST", "/flavors", {"flavor": {
            "name": fid, "id": fid, "ram": 256, "vcpus": 1, "disk": 1,
            "os-flavor-access:is_public": public}})
        assert r.status_code == 200, r.text
        r = admin("POST", f"/flavors/{fid}/os-extra_specs",
                  {"extra_specs": {"hw:cpu_policy": "dedicated"}})
        assert r.status_code == 200, r.text
        ids[kind] = fid
    r = admin("POST", f"/flavors/{ids['private']}/action",
              {"addTenantAccess": {"tenant": conformance.project_id("demo")}})
    assert r.status_code == 200, r.text
    yield {"tag": tag, **ids}
    for fid in ids.values():
        admin("DELETE", f"/flavors/{fid}")


@pytest.fixture(scope="module")
def apis(conformance):
    return {p: Api(conformance, cloud) for p, cloud in PERSONAS.items()}


def _scratch_flavor(admin, world, persona, public=True):
    fid = f"okc-persona-scratch-{persona}-{uuid.uuid4().hex[:6]}"
    r = admin("POST", "/flavors", {"flavor": {
        "name": fid, "id": fid, "ram": 128, "vcpus": 1, "disk": 0,
        "os-flavor-access:is_public": public}})
    assert r.status_code == 200, r.text
    return fid


def _run(op, api, admin, world, conformance, persona):
    """Perform one operation as `api`; returns (response, cleanup callables)."""
    private, public = world["private"], world["public"]
    alt = conformance.project_id("alt_demo")
    cleanup = []
    if op == "list flavors":
        return api("GET", "/flavors"), cleanup
    if op == "list flavors detail":
        return api("GET", "/flavors/detail"), cleanup
    if op == "show public flavor":
        return api("GET", f"/flavors/{public}"), cleanup
    if op == "show private flavor":
        return api("GET", f"/flavors/{private}"), cleanup
    if op == "create flavor":
        fid = f"okc-persona-new-{persona}-{uuid.uuid4().hex[:6]}"
        cleanup.append(lambda: admin("DELETE", f"/flavors/{fid}"))
        return api("POST", "/flavors", {"flavor": {
            "name": fid, "id": fid, "ram": 128, "vcpus": 1, "disk": 0}}), cleanup
    if op == "update flavor description (2.55)":
        return api("PUT", f"/flavors/{private}",
                   {"flavor": {"description": f"set by {persona}"}}, mv="2.55"), cleanup
    if op == "delete flavor":
        fid = _scratch_flavor(admin, world, persona)
        cleanup.append(lambda: admin("DELETE", f"/flavors/{fid}"))
        return api("DELETE", f"/flavors/{fid}"), cleanup
    if op == "list extra specs of public flavor":
        return api("GET", f"/flavors/{public}/os-extra_specs"), cleanup
    if op == "list extra specs of private flavor":
        return api("GET", f"/flavors/{private}/os-extra_specs"), cleanup
    if op == "show extra spec of private flavor":
        return api("GET", f"/flavors/{private}/os-extra_specs/hw:cpu_policy"), cleanup
    if op in ("create extra specs", "update extra spec", "delete extra spec"):
        fid = _scratch_flavor(admin, world, persona, public=False)
        cleanup.append(lambda: admin("DELETE", f"/flavors/{fid}"))
        if op == "create extra specs":
            return api("POST", f"/flavors/{fid}/os-extra_specs",
                       {"extra_specs": {"hw:numa_nodes": "1"}}), cleanup
        r = admin("POST", f"/flavors/{fid}/os-extra_specs", {"extra_specs": {"hw:numa_nodes": "1"}})
        assert r.status_code == 200, r.text
        if op == "update extra spec":
            return api("PUT", f"/flavors/{fid}/os-extra_specs/hw:numa_nodes",
                       {"hw:numa_nodes": "2"}), cleanup
        return api("DELETE", f"/flavors/{fid}/os-extra_specs/hw:numa_nodes"), cleanup
    if op == "list flavor access":
        return api("GET", f"/flavors/{private}/os-flavor-access"), cleanup
    if op in ("add tenant access", "remove tenant access"):
        fid = _scratch_flavor(admin, world, persona, public=False)
        cleanup.append(lambda: admin("DELETE", f"/flavors/{fid}"))
        if op == "add tenant access":
            return api("POST", f"/flavors/{fid}/action", {"addTenantAccess": {"tenant": alt}}), cleanup
        r = admin("POST", f"/flavors/{fid}/action", {"addTenantAccess": {"tenant": alt}})
        assert r.status_code == 200, r.text
        return api("POST", f"/flavors/{fid}/action", {"removeTenantAccess": {"tenant": alt}}), cleanup
    if op == "add access for a project Keystone does not know":
        fid = _scratch_flavor(admin, world, persona, public=False)
        cleanup.append(lambda: admin("DELETE", f"/flavors/{fid}"))
        return api("POST", f"/flavors/{fid}/action",
                   {"addTenantAccess": {"tenant": uuid.uuid4().hex}}), cleanup
    raise AssertionError(f"unknown operation {op!r}")


@pytest.mark.parametrize("persona", ALL)
@pytest.mark.parametrize("op", list(STATUS))
def test_status(op, persona, apis, admin, world, conformance):
    expected = STATUS[op][persona]
    resp, cleanup = _run(op, apis[persona], admin, world, conformance, persona)
    try:
        assert resp.status_code == expected, (
            f"{persona} {op}: expected {expected}, got {resp.status_code}: {resp.text[:300]}")
        _check_fault(resp)
    finally:
        for fn in cleanup:
            fn()


def _flavor_ids(resp):
    assert resp.status_code == 200, resp.text
    return {f["id"] for f in resp.json()["flavors"]}


@pytest.mark.parametrize("persona", ALL)
@pytest.mark.parametrize("question", list(VISIBLE))
def test_visibility(question, persona, apis, world):
    api = apis[persona]
    private, public = world["private"], world["public"]
    if question == "private flavor in GET /flavors":
        answer = private in _flavor_ids(api("GET", "/flavors"))
    elif question == "private flavor in GET /flavors/detail":
        answer = private in _flavor_ids(api("GET", "/flavors/detail"))
    elif question == "private flavor in GET /flavors?is_public=None":
        answer = private in _flavor_ids(api("GET", "/flavors?is_public=None"))
    elif question == "extra_specs in the flavor body at 2.61":
        r = api("GET", f"/flavors/{public}", mv="2.61")
        assert r.status_code == 200, r.text
        answer = r.json()["flavor"].get("extra_specs") == {"hw:cpu_policy": "dedicated"}
    else:
        raise AssertionError(question)
    assert answer == VISIBLE[question][persona], f"{persona}: {question} -> {answer}"


@pytest.mark.parametrize("token", [None, "not-a-valid-token"], ids=["no token", "bogus token"])
def test_unauthenticated_is_401_with_keystone_challenge(token, conformance):
    """keystonemiddleware's answer: 401 and WWW-Authenticate: Keystone uri="<www_authenticate_uri>"."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(conformance.compute_url + "/flavors",
                                 headers={"Accept": "application/json"})
    if token:
        req.add_header("X-Auth-Token", token)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code == 401
    challenge = err.value.headers.get("WWW-Authenticate", "")
    keystone_root = conformance.keystone_url.rsplit("/v3", 1)[0]
    assert challenge.startswith("Keystone uri=") and keystone_root in challenge, challenge
