"""tools/flavor_api_differential.py counts as explained only the differences docs/differential.md
documents: OpenKeel's 400 for a NUL or invalid Unicode character, when the request carries one."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests._shared import ROOT


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("flavor_api_differential",
                                                  ROOT / "tools" / "flavor_api_differential.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _refusal(place: str) -> dict:
    return {"badRequest": {"code": 400, "message": f"Invalid input received: {place} contains a NUL character or "
                                                   "an invalid Unicode character."}}


def _request(tool, path: str, body: bytes | None = None, token: str = "admin:admin"):
    return tool.Request("POST /flavors/{id}/action", "POST", path, {"X-Auth-Token": token}, body)


def _answer(tool, status: int, body) -> object:
    return tool.Answer(status, {}, body)


def test_a_nul_in_the_url_is_explained_whatever_nova_answered(tool):
    req = _request(tool, "/flavors/%00/action", b'{"addTenantAccess": {"tenant": "admin"}}')
    ours = _answer(tool, 400, _refusal("the URL"))
    for nova in (_answer(tool, 404, {"itemNotFound": {"code": 404, "message": "Flavor \x00 could not be found."}}),
                 _answer(tool, 403, {"forbidden": {"code": 403, "message": "Policy doesn't allow …"}}),
                 _answer(tool, 500, {"computeFault": {"code": 500, "message": "Unexpected API Error."}})):
        assert "NUL" in tool.explain(req, nova, ours, {})


def test_a_nul_in_the_body_names_the_body(tool):
    req = _request(tool, "/flavors/f1/os-extra_specs", b'{"extra_specs": {"k": "a\\u0000b"}}')
    ours = _answer(tool, 400, _refusal("the request body"))
    assert "the request body" in tool.explain(req, _answer(tool, 200, {}), ours, {})


def test_the_same_refusal_without_the_character_is_a_mismatch(tool):
    req = _request(tool, "/flavors/plain/action", b'{"addTenantAccess": {"tenant": "admin"}}')
    assert tool.explain(req, _answer(tool, 404, {}), _answer(tool, 400, _refusal("the URL")), {}) is None
    # the character is in the body, the answer blames the URL
    req = _request(tool, "/flavors/plain/action", b'{"addTenantAccess": {"tenant": "a\\u0000"}}')
    assert tool.explain(req, _answer(tool, 404, {}), _answer(tool, 400, _refusal("the URL")), {}) is None


def test_other_answers_to_a_nul_are_mismatches(tool):
    req = _request(tool, "/flavors/%00/action")
    assert tool.explain(req, _answer(tool, 404, {}), _answer(tool, 404, {"itemNotFound": {}}), {}) is None
    assert tool.explain(req, _answer(tool, 404, {}), _answer(tool, 500, _refusal("the URL")), {}) is None
    other_400 = {"badRequest": {"code": 400, "message": "Invalid input for field/attribute tenant."}}
    assert tool.explain(req, _answer(tool, 404, {}), _answer(tool, 400, other_400), {}) is None
    # both refuse: a 400 against a 400 with other words is a real difference
    assert tool.explain(req, _answer(tool, 400, other_400), _answer(tool, 400, _refusal("the URL")), {}) is None
