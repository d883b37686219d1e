"""The flavor name filter (2.102) picks what the live Nova 34.0.0 picks, Unicode names included.

Nova matches the filter with Python's ``re`` (SQLite's REGEXP): ``\\w``, ``\\d``, ``\\s`` and ``\\b``
are Unicode classes, ``(?i)`` folds non-ASCII letters, ``$`` also matches before a final newline.
The same flavors are made on the servers oracle (../shared/nova-oracle/run-servers-oracle.sh) and on
OpenKeel; each pattern must list the same flavors on both. The servers' name, ip and other regular-
expression filters share the matcher (db/regex.py); tests/db/test_python_regex.py compares it with
Python's ``re`` on generated patterns.
"""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.api import oracles

NAMES = ["café-k1", "CAFÉ-K2", "naïve_3", "Ñandú-٣", "日本語-x", "plain-k", "two words", "ıstanbul", "straße",
         "ǅemal", "ohm-Ω", "kelvin-\u212a", "sup-²"]
PATTERNS = [r"\w+-k", r"^\w+-\w$", r"\W", r"\d$", r"\D\d", r"\s", r"\S+\s", r"\bk", r"\Bk", r"k\b", r"é\b",
            r"\w\b-", r"(?i)café", r"(?i)ÇAFÉ|ñ", r"(?i)^i", r"(?i)STRASSE|STRAßE", r"(?i)ǆ", r"(?i)ω", r"(?i)k\d",
            r"[^\W\d_]{5}", r"[\w-]{7,}$", r"(?a)^\w+-", r"(?a)\W", r"\u00e9", r"\N{LATIN SMALL LETTER SHARP S}",
            r"(?x) n a ï v e", r"^[^a-z]", r"(?i)^[a-z]+-", r"\Z", r"x\Z", r"1$", r"²"]


@pytest.fixture(scope="module")
def nova():
    with oracles.servers_oracle() as url:
        yield url


def _ids(answer: oracles.Answer) -> list[str]:
    assert answer.status == 200, answer.body
    return sorted(f["id"] for f in answer.json["flavors"])


def test_name_patterns_list_the_flavors_nova_lists(nova, client):
    for number, name in enumerate(NAMES):
        body = json.dumps({"flavor": {"name": name, "ram": 64, "vcpus": 1, "disk": 1,
                                      "id": f"rx-{number}"}}).encode()
        for ask, where in ((oracles.ask_nova, nova), (oracles.ask_openkeel, client)):
            assert ask(where, "POST", "/v2.1/flavors", version="2.55", body=body).status == 200
    differences = []
    for pattern in PATTERNS:
        path = "/v2.1/flavors?name=" + urllib.parse.quote(pattern, safe="")
        theirs = _ids(oracles.ask_nova(nova, "GET", path, version="2.102"))
        ours = _ids(oracles.ask_openkeel(client, "GET", path, version="2.102"))
        theirs = [i for i in theirs if i.startswith("rx-")]  # the oracle's own flavors aside
        if theirs != [i for i in ours if i.startswith("rx-")]:
            differences.append((pattern, theirs, ours))
    assert differences == []
