"""The HTTP core: version documents, microversions, faults, auth, size limit, routing.

Expected statuses, headers and bodies were taken from the Nova 34.0.0 oracle
(../shared/nova-oracle/run-oracle.sh) on 2026-11-29.
"""

from __future__ import annotations

import io
import logging

import pytest

from openkeel_compute.api import deploy
from tests.api.helpers import NOT_FOUND_TEXT, UNAUTHORIZED_TEXT, assert_unversioned, assert_versioned
from tests.conftest import admin, make_conf, user


def test_root_lists_both_versions_with_links_from_the_request_host(client):
    got = client.get("/")
    assert got.status_code == 200
    assert got.header("Content-Type") == "application/json"
    assert got.json == {"versions": [
        {"id": "v2.0", "status": "DEPRECATED", "version": "", "min_version": "", "updated": "2025-07-04T12:00:00Z",
         "links": [{"rel": "self", "href": "http://127.0.0.1:18774/v2/"}]},
        {"id": "v2.1", "status": "CURRENT", "version": "2.104", "min_version": "2.1",
         "updated": "2013-07-23T11:33:21Z", "links": [{"rel": "self", "href": "http://127.0.0.1:18774/v2.1/"}]},
    ]}
    assert_unversioned(got)


@pytest.mark.parametrize("path", ["/v2.1", "/v2.1/"])
def test_v21_document_needs_no_token_and_carries_version_headers(client, path):
    got = client.get(path, headers={"OpenStack-API-Version": "compute 2.5"})
    assert got.status_code == 200
    assert got.json["version"]["links"][0] == {"rel": "self", "href": "http://127.0.0.1:18774/v2.1/"}
    assert got.json["version"]["media-types"] == [
        {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}]
    assert_versioned(got, "2.5")


def test_v21_document_refuses_an_unsupported_version_with_406(client):
    got = client.get("/v2.1", headers={"OpenStack-API-Version": "compute 2.999"})
    assert got.status_code == 406
    assert got.json == {"computeFault": {"code": 406, "message": (
        "Version 2.999 is not supported by the API. Minimum is 2.1 and maximum is 2.104.")}}
    assert_versioned(got, "2.999")


@pytest.mark.parametrize("path", ["/v2", "/v2/"])
def test_legacy_v2_document_has_no_version_headers(client, path):
    got = client.get(path, headers={"OpenStack-API-Version": "compute 2.5"})
    assert got.status_code == 200
    assert got.json["version"]["id"] == "v2.0"
    assert got.json["version"]["links"][0]["href"] == "http://127.0.0.1:18774/v2/"
    assert_unversioned(got)


def test_other_paths_get_nova_multiple_choices(client):
    got = client.get("/nosuch")
    assert got.status_code == 300
    assert [c["links"][0]["href"] for c in got.json["choices"]] == [
        "http://127.0.0.1:18774/v2/nosuch", "http://127.0.0.1:18774/v2.1/nosuch"]


@pytest.mark.parametrize("headers, version", [
    ({}, "2.1"),
    ({"OpenStack-API-Version": "compute latest"}, "2.104"),
    ({"OpenStack-API-Version": "compute 2.1, volume 3.0"}, "2.1"),
    ({"OpenStack-API-Version": "compute  2.5"}, "2.5"),
    ({"OpenStack-API-Version": "compute"}, "2.1"),
    ({"OpenStack-API-Version": "COMPUTE 2.5"}, "2.5"),
    ({"OpenStack-API-Version": "volume 3.50"}, "2.1"),
    ({"X-OpenStack-Nova-API-Version": "latest"}, "2.104"),
    ({"X-OpenStack-Nova-API-Version": "2.60"}, "2.60"),
    ({"X-OpenStack-Nova-API-Version": "2.60", "OpenStack-API-Version": "compute 2.70"}, "2.70"),
])
def test_microversion_negotiation(client, headers, version):
    got = client.get("/v2.1/flavors", headers=admin(**headers))
    assert got.status_code == 200
    assert_versioned(got, version)


@pytest.mark.parametrize("headers, text", [
    ({"OpenStack-API-Version": "compute 2.a"}, "2.a"),
    ({"OpenStack-API-Version": "compute 2.01"}, "2.01"),
    ({"X-OpenStack-Nova-API-Version": "2.a"}, "2.a"),
])
def test_malformed_version_is_400_without_version_headers(client, headers, text):
    got = client.get("/v2.1/flavors", headers=admin(**headers))
    assert got.status_code == 400
    assert got.header("Content-Type") == "application/json; charset=UTF-8"
    assert got.json == {"badRequest": {"code": 400, "message": (
        f"API Version String {text} is of invalid format. Must be of format MajorNum.MinorNum.")}}
    assert_unversioned(got)


@pytest.mark.parametrize("requested", ["2.0", "3.0", "2.105"])
def test_out_of_range_version_is_406_echoing_the_request(client, requested):
    got = client.get("/v2.1/flavors", headers=admin(**{"OpenStack-API-Version": f"compute {requested}"}))
    assert got.status_code == 406
    assert_versioned(got, requested)


def test_request_ids_on_every_answer_including_errors(client):
    for got in (client.get("/"), client.get("/v2.1/flavors"), client.get("/v2.1/nosuch", headers=admin())):
        request_id = got.header("x-openstack-request-id")
        assert request_id and request_id.startswith("req-")
        assert got.header("x-compute-request-id") == request_id


def test_no_token_is_webob_401_page(client):
    got = client.get("/v2.1/flavors")
    assert got.status_code == 401
    assert got.header("Content-Type") == "text/plain; charset=UTF-8"
    assert got.text == UNAUTHORIZED_TEXT
    assert_unversioned(got)


def test_401_comes_before_version_parsing(client):
    got = client.get("/v2.1/flavors", headers={"OpenStack-API-Version": "compute 2.a"})
    assert got.status_code == 401


def test_413_comes_before_authentication(client):
    body = b"x" * 200000
    for headers in (admin(), {}):
        got = client.post("/v2.1/flavors", headers=dict(headers, **{"Content-Type": "application/json"}), body=body)
        assert got.status_code == 413
        assert got.text == ("413 Request Entity Too Large\n\nRequest is too large. Larger than "
                            "max_request_body_size (%s).\n\n   ")


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_get_or_delete_with_a_body_still_meets_the_size_limit(client, method):
    # Only requests with no body at all skip oslo.middleware's limiter (api/deploy.py:BodySizeLimit).
    got = client.request(method, "/v2.1/flavors/x", headers=admin(), body=b"x" * 200000)
    assert got.status_code == 413
    assert "max_request_body_size" in got.text


def test_a_chunked_get_meets_the_limiter_too(tmp_path):
    seen = []

    class Spy:
        def __init__(self, app):
            self.app = app

        def __call__(self, environ, start_response):
            seen.append(type(environ["wsgi.input"]).__name__)
            return self.app(environ, start_response)

    limiter = deploy.BodySizeLimit(Spy(lambda environ, start_response: start_response("204 No Content", []) or []),
                                   make_conf(tmp_path))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "HTTP_TRANSFER_ENCODING": "chunked",
               "wsgi.input": io.BytesIO(b""), "SERVER_NAME": "x", "SERVER_PORT": "80", "wsgi.url_scheme": "http"}
    limiter(environ, lambda status, headers: None)
    assert seen == ["LimitingReader"], "a chunked body is read through oslo.middleware's LimitingReader"
    seen.clear()
    del environ["HTTP_TRANSFER_ENCODING"]
    environ["wsgi.input"] = io.BytesIO(b"")
    limiter(environ, lambda status, headers: None)
    assert seen == ["BytesIO"], "no body: straight to the application"


@pytest.mark.parametrize("method, path", [
    ("GET", "/v2.1/nosuch"), ("GET", "/v2.1/flavors/x/nosuch"), ("DELETE", "/v2.1/flavors"),
    ("PUT", "/v2.1/flavors"), ("GET", "/v2.1/flavors/"), ("GET", "/v2.1/flavors/detail/"),
    ("PATCH", "/v2.1/flavors/x"), ("GET", "/v2.1/admin/flavors"),
])
def test_unknown_routes_and_methods_are_plain_404(client, method, path):
    got = client.request(method, path, headers=admin())
    assert got.status_code == 404
    assert got.header("Content-Type") == "text/plain; charset=UTF-8"
    assert got.text == NOT_FOUND_TEXT
    assert_unversioned(got)


def test_unknown_route_page_follows_accept_like_nova(client):
    got = client.get("/v2.1/nosuch", headers=admin(Accept="application/json"))
    assert got.status_code == 404
    assert got.json == {"message": "The resource could not be found.<br /><br />\n\n\n",
                        "code": "404 Not Found", "title": "Not Found"}


@pytest.mark.parametrize("raw, message", [
    (b"{bad json", "Malformed request body"),
    (b"[1,2]", "[1, 2] is not of type 'object'"),
    (b'"str"', "'str' is not of type 'object'"),
    (b"", "None is not of type 'object'"),
])
def test_bad_bodies_get_nova_messages(client, raw, message):
    got = client.post("/v2.1/flavors", headers=admin(**{"Content-Type": "application/json"}), body=raw)
    assert got.status_code == 400
    assert got.json == {"badRequest": {"code": 400, "message": message}}
    assert_versioned(got, "2.1")
    assert client.get("/v2.1/flavors", headers=admin()).json == {"flavors": []}, "nothing written"


def test_wrong_content_type_is_415(client):
    got = client.post("/v2.1/flavors", headers=admin(**{"Content-Type": "application/xml"}),
                      body=b'{"flavor": {"name": "a", "ram": 1, "vcpus": 1, "disk": 1}}')
    assert got.status_code == 415
    assert got.json == {"badMediaType": {"code": 415, "message": "Unsupported Content-Type"}}
    assert_versioned(got, "2.1")


@pytest.mark.parametrize("content_type", ["text/plain", None])
def test_plain_or_missing_content_type_is_read_as_json(client, content_type):
    headers = admin()
    if content_type:
        headers["Content-Type"] = content_type
    got = client.post("/v2.1/flavors", headers=headers, body=b'{"flavor": {"name": "a", "ram": 1, "vcpus": 1, "disk": 1}}')
    assert got.status_code == 200, got.text


@pytest.mark.parametrize("body, message", [
    ({"addTenantAccess": {"tenant": "x"}, "removeTenantAccess": {"tenant": "x"}}, "Malformed request body"),
    ({}, "Malformed request body"),
    ({"fooAccess": {}}, "There is no such action: fooAccess"),
])
def test_action_bodies_need_exactly_one_known_key(client, body, message):
    got = client.post("/v2.1/flavors/nonexist/action", headers=admin(), json_body=body)
    assert got.status_code == 400
    assert got.json["badRequest"]["message"] == message


def test_project_id_in_the_url_must_match_the_token(client):
    ok = client.get("/v2.1/abc123/flavors", headers=user("abc123"))
    assert ok.status_code == 200
    bad = client.get("/v2.1/abc123/flavors", headers=admin())
    assert bad.status_code == 400
    assert bad.json["badRequest"]["message"] == (
        "Malformed request URL: URL's project_id 'abc123' doesn't match Context's project_id 'admin'")
    assert_versioned(bad, "2.1")


@pytest.mark.parametrize("token, project", [("bee", "bee"), ("bee:", "bee"), ("bee:cafe", "cafe")])
def test_noauth2_token_forms_set_the_project(client, token, project):
    # The URL's project id must equal the token's: a 200 proves which project the token carries.
    assert client.get(f"/v2.1/{project}/flavors", headers={"X-Auth-Token": token}).status_code == 200


def test_noauth2_admin_is_admin_and_others_are_not(client):
    body = {"flavor": {"name": "n", "ram": 1, "vcpus": 1, "disk": 1}}
    assert client.post("/v2.1/flavors", headers=user(), json_body=body).status_code == 403
    assert client.post("/v2.1/flavors", headers=admin(), json_body=body).status_code == 200


def test_method_outside_its_version_range_is_a_json_404(client):
    got = client.put("/v2.1/flavors/x", headers=admin(**{"OpenStack-API-Version": "compute 2.54"}),
                     json_body={"flavor": {"description": "x"}})
    assert got.status_code == 404
    assert got.json == {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}
    assert_versioned(got, "2.54")


def test_healthcheck_answers_without_auth(client):
    got = client.get("/healthcheck")
    assert got.status_code == 200
    assert got.header("x-openstack-request-id") is None, "answered before the API pipeline"


def test_every_request_gets_an_access_log_line_with_its_request_id(client, caplog):
    with caplog.at_level(logging.INFO, logger="openkeel_compute.api.access"):
        got = client.get("/v2.1/flavors?limit=1", headers=admin())
    request_id = got.header("x-openstack-request-id")
    lines = [r.getMessage() for r in caplog.records if r.name == "openkeel_compute.api.access"]
    assert len(lines) == 1
    assert request_id in lines[0] and '"GET /v2.1/flavors?limit=1"' in lines[0] and "status: 200" in lines[0]


@pytest.mark.parametrize("raw, status", [
    (b"null", 404), (b"true", 404), (b"3", 404), (b'"x"', 404), (b'["a"]', 404),
    (b'""', 400), (b'"xy"', 400), (b"[]", 400), (b"[1,2]", 400),
])
def test_action_bodies_that_are_not_objects_answer_as_nova(client, raw, status):
    got = client.post("/v2.1/flavors/any/action", headers=admin(**{"Content-Type": "application/json"}), body=raw)
    assert got.status_code == status
    message = "The resource could not be found." if status == 404 else "Malformed request body"
    assert got.json == {("itemNotFound" if status == 404 else "badRequest"): {"code": status, "message": message}}
    assert_versioned(got, "2.1")
