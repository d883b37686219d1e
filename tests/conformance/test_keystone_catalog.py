"""The Keystone project check and the project-prefixed version document on a real deployment.

The tier configures no [keystone] endpoint_override: the compute API must find Keystone in the
caller's token's catalog (which keystonemiddleware hands on in the v2 format) to tell a real
project from an unknown one. Without it, every addTenantAccess would answer 400 "Nova was
unable to find Keystone service endpoint.", which a status-only check cannot tell apart from
"Project ID … is not a valid project.".
"""

from __future__ import annotations

import uuid

import pytest


def _session(conformance, cloud: str):
    from keystoneauth1 import session
    from keystoneauth1.identity import v3

    return session.Session(auth=v3.Password(**conformance.clouds[cloud]["auth"]))


def _call(sess, url: str, method: str = "GET", body=None):
    return sess.request(url, method, json=body, raise_exc=False, connect_retries=1,
                        headers={"Accept": "application/json"})


@pytest.fixture(scope="module")
def private_flavor(conformance):
    admin = _session(conformance, "conformance-admin")
    fid = f"okc-catalog-{uuid.uuid4().hex[:8]}"
    r = _call(admin, conformance.compute_url + "/flavors", "POST", {"flavor": {
        "name": fid, "id": fid, "ram": 256, "vcpus": 1, "disk": 1, "os-flavor-access:is_public": False}})
    assert r.status_code == 200, r.text
    yield admin, fid
    _call(admin, f"{conformance.compute_url}/flavors/{fid}", "DELETE")


def test_a_real_project_is_accepted(conformance, private_flavor):
    admin, fid = private_flavor
    r = _call(admin, f"{conformance.compute_url}/flavors/{fid}/action", "POST",
              {"addTenantAccess": {"tenant": conformance.project_id("alt_demo")}})
    assert r.status_code == 200, r.text


def test_an_unknown_project_is_refused_by_keystones_answer(conformance, private_flavor):
    admin, fid = private_flavor
    unknown = uuid.uuid4().hex
    r = _call(admin, f"{conformance.compute_url}/flavors/{fid}/action", "POST",
              {"addTenantAccess": {"tenant": unknown}})
    assert r.status_code == 400, r.text
    assert r.json() == {"badRequest": {"code": 400, "message": f"Project ID {unknown} is not a valid project."}}


def test_the_project_prefixed_version_document(conformance):
    member = _session(conformance, "conformance-demo-member")
    demo = conformance.project_id("demo")
    r = _call(member, f"{conformance.compute_url}/{demo}/")
    assert r.status_code == 200, r.text
    assert r.json()["version"]["id"] == "v2.1"
    assert r.json()["version"]["links"][0] == {"rel": "self", "href": conformance.compute_url + "/"}
    other = conformance.project_id("alt_demo")
    r = _call(member, f"{conformance.compute_url}/{other}/")
    assert r.status_code == 400, r.text
    assert r.json()["badRequest"]["message"] == (
        f"Malformed request URL: URL's project_id '{other}' doesn't match Context's project_id '{demo}'")
