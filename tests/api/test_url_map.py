"""The URL map around the project-id prefix, the version documents and /versions/{id}.

Every expectation here was read from the Nova 34.0.0 oracle (../shared/nova-oracle/run-oracle.sh)
on 2026-12-01: GET and HEAD, without a token, with the URL's project, with another project,
trailing and doubled slashes, and segments that only look like a project id.
"""

from __future__ import annotations

import pytest

from tests.api.helpers import NOT_FOUND_TEXT, UNAUTHORIZED_TEXT, assert_unversioned, assert_versioned
from tests.conftest import admin, user

V21_SELF = {"rel": "self", "href": "http://127.0.0.1:18774/v2.1/"}
V20_SELF = {"rel": "self", "href": "http://127.0.0.1:18774/v2/"}


def _mismatch(project: str, token_project: str = "admin") -> dict:
    return {"badRequest": {"code": 400, "message": (
        f"Malformed request URL: URL's project_id '{project}' doesn't match Context's project_id '{token_project}'")}}


@pytest.mark.parametrize("path", ["/v2.1/abc123/", "/v2.1/abc123//", "/v2.1//abc123/", "//v2.1/abc123/",
                                  "/v2.1/abc123/versions/v2.1"])
def test_project_prefixed_v21_document_is_the_version_document(client, path):
    got = client.get(path, headers=user("abc123", version="2.5"))
    assert got.status_code == 200, got.text
    assert got.header("Content-Type") == "application/json"
    assert got.json["version"]["id"] == "v2.1"
    assert got.json["version"]["links"][0] == V21_SELF
    assert_versioned(got, "2.5")


@pytest.mark.parametrize("path", ["/v2/abc123/", "/v2/abc123/versions/v2.1", "/v2/abc123/versions/anything",
                                  "/v2/versions/v2.0"])
def test_project_prefixed_legacy_document_is_v2_without_version_headers(client, path):
    got = client.get(path, headers=user("abc123", version="2.5"))
    assert got.status_code == 200, got.text
    assert got.json["version"]["id"] == "v2.0"
    assert got.json["version"]["links"][0] == V20_SELF
    assert_unversioned(got)


@pytest.mark.parametrize("path", ["/v2.1/abc123/", "/v2/abc123/", "/v2.1/abc123/versions/v2.1",
                                  "/v2.1/versions/v2.1", "/v2.1/abc123/versions"])
def test_project_prefixed_documents_need_a_token(client, path):
    got = client.get(path)
    assert got.status_code == 401
    assert got.text == UNAUTHORIZED_TEXT


@pytest.mark.parametrize("path, project", [("/v2.1/abc123/", "abc123"), ("/v2.1/abc123/versions/v2.1", "abc123"),
                                           ("/v2.1/abc123/versions/foo", "abc123"), ("/v2.1/0/", "0"),
                                           ("/v2.1/abc-123/", "abc-123")])
def test_another_projects_prefix_is_refused_with_nova_message(client, path, project):
    got = client.get(path, headers=admin())
    assert got.status_code == 400
    assert got.json == _mismatch(project)
    assert_versioned(got, "2.1")


def test_another_projects_prefix_on_the_legacy_api_has_no_version_headers(client):
    got = client.get("/v2/abc123/", headers=admin())
    assert got.status_code == 400
    assert got.json == _mismatch("abc123")
    assert_unversioned(got)


def test_project_prefixed_document_refuses_an_unsupported_version(client):
    got = client.get("/v2.1/abc123/", headers=user("abc123", version="2.999"))
    assert got.status_code == 406
    assert got.json["computeFault"]["message"] == (
        "Version 2.999 is not supported by the API. Minimum is 2.1 and maximum is 2.104.")
    assert_versioned(got, "2.999")


@pytest.mark.parametrize("path, version_id", [("/v2.1/versions/v2.1", "v2.1"), ("/v2.1/versions/v2.0", "v2.0"),
                                              ("/v2.1/abc123/versions/v2.0", "v2.0")])
def test_versions_by_id(client, path, version_id):
    got = client.get(path, headers=user("abc123"))
    assert got.status_code == 200, got.text
    assert got.json["version"]["id"] == version_id
    # The self link is the API the request came through, whichever document it shows.
    assert got.json["version"]["links"][0] == V21_SELF
    assert_versioned(got, "2.1")


@pytest.mark.parametrize("path", ["/v2.1/versions/foo", "/v2.1/abc123/versions/foo"])
def test_unknown_version_id_is_a_json_404(client, path):
    got = client.get(path, headers=user("abc123"))
    assert got.status_code == 404
    assert got.json == {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}
    assert_versioned(got, "2.1")


@pytest.mark.parametrize("path", ["/v2.1/abc123", "/v2/abc123", "/v2.1/abc123/versions", "/v2.1/abc123/versions/",
                                  "/v2.1/versions", "/v2.1/versions/", "/v2.1/ABC123/", "/v2.1/xyz/"])
def test_what_is_not_a_route_stays_a_plain_404(client, path):
    got = client.get(path, headers=user("abc123"))
    assert got.status_code == 404
    assert got.text == NOT_FOUND_TEXT
    assert_unversioned(got)


@pytest.mark.parametrize("path", ["/v2.1/abc123/", "/v2/abc123/", "/v2.1/versions/v2.1", "/v2.1/abc123/versions/v2.1"])
def test_head_on_the_authenticated_documents_is_404_as_nova_routes_only_get(client, path):
    got = client.request("HEAD", path, headers=user("abc123"))
    assert got.status_code == 404
    assert got.content == b""


@pytest.mark.parametrize("path, versioned", [("/v2.1", True), ("/v2.1/", True), ("/v2.1//", True), ("//v2.1", True),
                                             ("/v2", False), ("/v2/", False)])
def test_head_on_the_open_version_documents_is_get_without_the_body(client, path, versioned):
    get = client.get(path, headers={"OpenStack-API-Version": "compute 2.5"})
    head = client.request("HEAD", path, headers={"OpenStack-API-Version": "compute 2.5"})
    assert head.status_code == get.status_code == 200
    assert head.content == b""
    assert head.header("Content-Length") == get.header("Content-Length") == str(len(get.content))
    assert head.header("Content-Type") == "application/json"
    if versioned:
        assert_versioned(head, "2.5")
    else:
        assert_unversioned(head)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
@pytest.mark.parametrize("path", ["/v2.1", "/v2.1/", "/v2/"])
def test_the_open_version_documents_answer_any_method(client, method, path):
    got = client.request(method, path)
    assert got.status_code == 200
    assert got.json["version"]["id"] == ("v2.0" if path == "/v2/" else "v2.1")


@pytest.mark.parametrize("path, status", [("/", 200), ("//", 200), ("/nosuch", 300), ("//nosuch", 300)])
def test_root_and_choices_answer_head_without_a_body(client, path, status):
    get = client.get(path)
    head = client.request("HEAD", path)
    assert get.status_code == head.status_code == status
    assert head.content == b""
    assert head.header("Content-Length") == str(len(get.content))


def test_doubled_slashes_are_one(client):
    assert client.get("//").json == client.get("/").json
    assert client.get("//v2.1").json == client.get("/v2.1/").json
    choices = client.get("//nosuch").json["choices"]
    assert [c["links"][0]["href"] for c in choices] == [
        "http://127.0.0.1:18774/v2/nosuch", "http://127.0.0.1:18774/v2.1/nosuch"]
