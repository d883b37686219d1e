"""Inputs that once gave a server error, a stalled worker or an engine-dependent answer: each now
has one answer, the same on SQLite, PostgreSQL and MariaDB, in Nova's fault format."""

from __future__ import annotations

import json

import pytest

from openkeel_compute.db import regex
from tests.reliability import world as w

NUL_REFUSED = "Invalid input received: {} contains a NUL character or an invalid Unicode character."
MALFORMED = "Malformed request body"
LIMIT = "Invalid input received: limit must be an integer"


def _get(world, path: str, query: str = "", version: str = "2.1", token: str = w.ADMIN) -> w.Answer:
    return w.call(world.app, "GET", "/v2.1" + path, query=query,
                  headers={"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"})


def _send(world, method: str, path: str, raw: bytes, version: str = "2.1", token: str = w.ADMIN,
          chunked: bool = False) -> w.Answer:
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}",
               "Content-Type": "application/json"}
    return w.call(world.app, method, "/v2.1" + path, headers=headers, body=raw, chunked=chunked)


def _fault(answer: w.Answer) -> tuple[int, str]:
    body = answer.json()
    (fault,) = body.values()
    assert fault["code"] == answer.status
    return answer.status, fault["message"]


@pytest.mark.parametrize(("query", "expected"), [
    ("minRam=2147483648", []),  # beyond the column: nothing is that large
    ("minDisk=9223372036854775807", []),
    ("minRam=-2147483649", [w.FLAVOR]),  # below it: everything is
])
def test_size_filters_beyond_the_column_range(world, query, expected):
    got = _get(world, "/flavors", query)
    assert got.status == 200
    assert [f["id"] for f in got.json()["flavors"] if f["id"] in (w.FLAVOR, "race-del")] == expected


@pytest.mark.parametrize("param", ["minRam", "minDisk"])
def test_size_filters_beyond_64_bits_are_bad_filters(world, param):
    got = _get(world, "/flavors", f"{param}=9223372036854775808")
    assert _fault(got) == (400, f"Invalid {param} filter [9223372036854775808]")


@pytest.mark.parametrize(("method", "path", "query", "raw", "where"), [
    ("GET", "/flavors/a\x00b", "", b"", "the URL"),
    ("GET", "/servers/\x00", "", b"", "the URL"),
    ("DELETE", f"/servers/{w.SERVER}/tags/a\x00b", "", b"", "the URL"),
    ("GET", "/flavors", "marker=a%00b", b"", "the query string"),
    ("GET", "/servers/detail", "marker=%00", b"", "the query string"),
    ("GET", "/os-keypairs", "user_id=%00", b"", "the query string"),
    ("POST", f"/flavors/{w.FLAVOR}/os-extra_specs", "", b'{"extra_specs": {"fz:x": "a\\u0000b"}}',
     "the request body"),
    ("POST", f"/flavors/{w.FLAVOR}/os-extra_specs", "", b'{"extra_specs": {"fz:x": "\\ud800"}}', None),
    # the big number takes the standard library's parser, which reads the lone surrogate
    ("POST", f"/flavors/{w.FLAVOR}/os-extra_specs", "",
     b'{"extra_specs": {"fz:x": "\\ud800", "fz:y": 1234567890123456789}}', "the request body"),
    ("PUT", f"/servers/{w.SERVER}/metadata/k", "", b'{"meta": {"k": "a\\u0000"}}', "the request body"),
])
def test_nul_and_unencodable_text_is_refused_everywhere(world, method, path, query, raw, where):
    got = w.call(world.app, method, "/v2.1" + path, query=query, body=raw,
                 headers={"X-Auth-Token": w.ADMIN, "OpenStack-API-Version": "compute 2.90",
                          **({"Content-Type": "application/json"} if raw else {})})
    # None: a lone surrogate that the JSON parser already refuses
    assert _fault(got) == (400, NUL_REFUSED.format(where) if where else MALFORMED)


def test_a_nul_in_the_token_project_is_refused(world):
    got = _get(world, "/limits", token="a\x00:\x00")
    assert _fault(got) == (400, NUL_REFUSED.format("the token's user or project"))


def test_a_flavor_name_with_nul_gets_nova_name_message(world):
    raw = b'{"flavor": {"name": "a\\u0000b", "ram": 1, "vcpus": 1, "disk": 1}}'
    status, message = _fault(_send(world, "POST", "/flavors", raw))
    assert status == 400 and message.startswith("An invalid 'name' value was provided.")


@pytest.mark.parametrize(("path", "version"), [
    ("/flavors", "2.1"), ("/servers", "2.1"), ("/servers/detail", "2.1"), ("/os-keypairs", "2.35"),
    (f"/servers/{w.SERVER}/os-instance-actions", "2.58"),
])
def test_a_limit_that_is_a_newline(world, path, version):
    assert _fault(_get(world, path, "limit=%0A", version=version, token=w.OWNER)) == (400, LIMIT)


@pytest.mark.parametrize("raw", [
    b"[" * 5000 + b"1234567890123456789" + b"]" * 5000,  # deeper than the stack, on the big-number path
    b"[" * 5000 + b"1" + b"]" * 5000,
    b'{"flavor": {"name": "n", "ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": NaN}}',
    (b'{"flavor": {"name": "n", "ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": Infinity, '
    b'"swap": 1234567890123456789}}'),
    (b'{"flavor": {"name": "n", "ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": 1e400, '
    b'"swap": 1234567890123456789}}'),
])
def test_bodies_that_are_not_json(world, raw):
    assert _fault(_send(world, "POST", "/flavors", raw)) == (400, MALFORMED)
    assert _fault(_send(world, "POST", f"/servers/{w.SERVER}/action", raw)) == (400, MALFORMED)


def test_a_catastrophic_regex_answers_at_once_on_a_long_name(world):
    # Python's backtracking engine needs 2^n steps for this pattern on an n-character name that
    # does not end in X: this name would hold a worker for hours there.
    name = "fz-" + "a" * 40
    _send(world, "POST", "/flavors", json.dumps({"flavor": {"name": name, "ram": 1, "vcpus": 1, "disk": 1,
                                                            "id": "fz-long"}}).encode())
    got = _get(world, "/flavors", "name=(.*.*)*X", version="2.102")
    assert (got.status, got.json()["flavors"]) == (200, [])
    got = _get(world, "/flavors", "name=^fz-a%2B$", version="2.102")
    assert [f["id"] for f in got.json()["flavors"]] == ["fz-long"]
    got = _get(world, "/servers", "name=(.*.*)*X", token=w.OWNER)
    assert (got.status, got.json()["servers"]) == (200, [])


@pytest.mark.parametrize("pattern", ["x++", "(?>a)", "(a)\\1", "(?=a)", "(?<=a)b", "(a)?(?(1)b|c)"])
def test_patterns_only_a_backtracking_engine_runs_are_bad_filters(world, pattern):
    from urllib.parse import quote

    status, message = _fault(_get(world, "/flavors", "name=" + quote(pattern), version="2.102"))
    assert status == 400 and message.startswith(f"Invalid name filter [{pattern}]: ")
    got = _get(world, "/servers", "name=" + quote(pattern), token=w.OWNER)
    assert _fault(got) == (400, (f"Invalid input for query parameters name. Value: {pattern}. "
                                f"{pattern!r} is not a 'regex'"))


def test_python_named_groups_are_supported(world):
    got = _get(world, "/flavors", "name=(?P<n>fz)-public", version="2.102")
    assert [f["id"] for f in got.json()["flavors"]] == [w.FLAVOR]
    got = _get(world, "/servers", "ip=192%5C.168", token=w.OWNER)
    assert [s["id"] for s in got.json()["servers"]] == [w.SERVER]


def test_unicode_classes_and_case_folding_in_filters_are_pythons(world):
    # Nova matches with Python's re: \w, \d, \s and \b are Unicode classes there, (?i) folds é and É
    from urllib.parse import quote

    flavor = {"flavor": {"name": "café-k1", "ram": 1, "vcpus": 1, "disk": 1, "id": "fz-cafe"}}
    assert _send(world, "POST", "/flavors", json.dumps(flavor).encode()).status == 200
    rename = {"server": {"name": "Ñandú-٣"}}
    assert _send(world, "PUT", f"/servers/{w.SERVER}", json.dumps(rename).encode(), token=w.OWNER).status == 200
    try:
        for pattern in ("\\w+-k", "^caf\\w-", "(?i)CAFÉ", "\\bk\\d$", "\\u00e9", "\\N{LATIN SMALL LETTER E WITH ACUTE}"):
            got = _get(world, "/flavors", "name=" + quote(pattern), version="2.102")
            assert [f["id"] for f in got.json()["flavors"]] == ["fz-cafe"], pattern
        for pattern in ("^\\w+-\\d$", "(?i)ñANDÚ", "ú\\b", "^\\S+$", "[^\\W\\d]-"):
            got = _get(world, "/servers", "name=" + quote(pattern), token=w.OWNER)
            assert [s["id"] for s in got.json()["servers"]] == [w.SERVER], pattern
        for pattern in ("(?a)^caf\\w", "f\\b", "é\\B"):  # ASCII-only \w; f and é are one word in Unicode
            got = _get(world, "/flavors", "name=" + quote(pattern), version="2.102")
            assert "fz-cafe" not in [f["id"] for f in got.json()["flavors"]], pattern
    finally:
        _send(world, "PUT", f"/servers/{w.SERVER}", json.dumps({"server": {"name": "srv-a"}}).encode(),
              token=w.OWNER)
        _send(world, "DELETE", "/flavors/fz-cafe", b"")


def test_the_regex_engine_is_linear():
    assert regex.supported("(.*.*)*X") and not regex.supported("(a)\\1") and not regex.supported("(")
    pattern = regex.compile_pattern("(.*.*)*X")
    assert not regex.search(pattern, "a" * 10000) and regex.search(pattern, "aX")
    assert not regex.search(pattern, None) and regex.search(regex.compile_pattern("^1$"), 1)


def test_a_chunked_body_is_read(world):
    raw = json.dumps({"flavor": {"description": "sent in chunks"}}).encode()
    got = _send(world, "PUT", f"/flavors/{w.FLAVOR}", raw, version="2.55", chunked=True)
    assert (got.status, got.json()["flavor"]["description"]) == (200, "sent in chunks")


def test_a_chunked_body_beyond_the_limit_is_413(world):
    raw = json.dumps({"flavor": {"description": "x" * 200_000}}).encode()
    got = _send(world, "PUT", f"/flavors/{w.FLAVOR}", raw, version="2.55", chunked=True)
    assert got.status == 413 and b"Request is too large." in got.body
    assert _get(world, f"/flavors/{w.FLAVOR}", version="2.55").json()["flavor"]["description"] != "x" * 200_000


@pytest.mark.parametrize(("value", "expected"), [("x", []), ("0", [w.SERVER]), ("^0$", [w.SERVER]), ("1", [])])
def test_a_regex_filter_on_an_integer_column_matches_its_decimal_text(world, value, expected):
    # launch_index is one of the columns Nova matches as a regular expression on its text
    got = _get(world, "/servers", f"all_tenants=1&launch_index={value}", token=w.ADMIN)
    assert got.status == 200
    assert [s["id"] for s in got.json()["servers"] if s["id"] == w.SERVER] == expected


def test_a_pattern_the_linear_time_engine_refuses_on_an_integer_column_is_a_400(world):
    got = _get(world, "/servers", "all_tenants=1&launch_index=x%2B%2B", token=w.ADMIN)
    assert got.status == 400 and "is not a 'regex'" in got.json()["badRequest"]["message"]


def test_many_regex_matches_are_written_into_the_statement(world, monkeypatch):
    # beyond the bound, keys are literals (PostgreSQL binds at most 65,535 parameters a statement)
    monkeypatch.setattr(regex, "_BOUND_KEYS", 1)
    got = _get(world, "/flavors", "name=^fz-p&is_public=none", version="2.102")
    assert [f["id"] for f in got.json()["flavors"]] == [w.FLAVOR_PRIVATE, w.FLAVOR]


LONG_ID = "u" * 256  # one past the columns that hold a user or project id (Nova's VARCHAR(255))
TOO_LONG = "Invalid input received: {} is longer than 255 characters."
_BOOT = {"server": {"name": "long-id", "imageRef": w.IMAGE, "flavorRef": w.FLAVOR, "networks": "none"}}


@pytest.mark.parametrize(("method", "path", "token", "version", "body", "place"), [
    ("POST", "/os-keypairs", f"{LONG_ID}:demo", "2.10", {"keypair": {"name": "long-id"}}, "the token's user or project"),
    ("POST", "/servers", f"demo:{LONG_ID}", "2.37", _BOOT, "the token's user or project"),
    ("POST", "/servers", f"{LONG_ID}:demo", "2.37", _BOOT, "the token's user or project"),
    ("POST", f"/servers/{w.SERVER}/action", f"{LONG_ID}:demo", "2.1", {"lock": None}, "the token's user or project"),
    ("DELETE", f"/servers/{w.SERVER}", f"{LONG_ID}:demo", "2.1", None, "the token's user or project"),
    ("PUT", f"/servers/{w.SERVER}/tags/long-id", f"{LONG_ID}:demo", "2.26", None, "the token's user or project"),
    ("POST", "/os-keypairs", w.ADMIN, "2.10", {"keypair": {"name": "long-id", "user_id": LONG_ID}}, "user_id"),
    ("PUT", f"/os-quota-sets/{LONG_ID}", w.ADMIN, "2.1", {"quota_set": {"cores": 5}}, "the project id"),
    ("PUT", "/os-quota-sets/demo?user_id=" + LONG_ID, w.ADMIN, "2.1", {"quota_set": {"cores": 5}}, "user_id"),
])
def test_an_identity_longer_than_its_column_is_refused_on_every_engine(world, method, path, token, version, body,
                                                                         place):
    # Nova on SQLite stores such an id (SQLite ignores lengths); on MySQL or PostgreSQL its write fails
    # with a server error. Here the write is refused before it, alike on every engine.
    path, _, query = path.partition("?")
    raw = json.dumps(body).encode() if body is not None else b""
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    got = w.call(world.app, method, "/v2.1" + path, query=query, headers=headers, body=raw)
    assert _fault(got) == (400, TOO_LONG.format(place))
    assert w.api(world.app, "GET", f"/servers/{w.SERVER}").json()["server"]["locked"] is False


@pytest.mark.parametrize("path", ["/servers/detail", "/os-keypairs", f"/os-quota-sets/{LONG_ID}", "/limits",
                                  f"/os-quota-sets/{LONG_ID}/detail", "/flavors", "/os-simple-tenant-usage"])
def test_reading_with_a_long_identity_answers_as_nova(world, path):
    # what nobody so named can own is simply not there
    got = _get(world, path, token=f"{LONG_ID}:{LONG_ID}")
    assert got.status in (200, 403), got.body


def test_a_key_pair_of_a_user_id_at_the_bound_is_stored_and_its_quota_lock_taken(world):
    import hashlib

    import sqlalchemy as sa

    from openkeel_compute.db.models import QUOTAS

    user = "v" * 255  # fits the key pair's column; its quota lock key ("user:" + id) would not
    body = {"keypair": {"name": "at-bound", "user_id": user}}
    got = w.call(world.app, "POST", "/v2.1/os-keypairs", headers={
        "X-Auth-Token": w.ADMIN, "OpenStack-API-Version": "compute 2.10", "Content-Type": "application/json"},
        body=json.dumps(body).encode())
    assert got.status == 201, got.body
    assert got.json()["keypair"]["user_id"] == user
    if world.engine_name == "mariadb":  # the only engine whose lock is a row
        digest = "sha256:" + hashlib.sha256(("user:" + user).encode()).hexdigest()
        with world.engine.connect() as conn:
            rows = conn.execute(sa.select(QUOTAS.c.project_id).where(QUOTAS.c.project_id == digest)).all()
        assert rows
