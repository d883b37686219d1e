"""Hostnames and reservation ids as Nova gives them (cases recorded from the Nova 34.0.0 API)."""

from __future__ import annotations

import json
import re

import pytest

from openkeel_compute.compute import names
from tests._shared import shared_path

UUID = "d78dfff6-331b-43ac-aac1-3cb99b632f04"


@pytest.mark.parametrize(("display_name", "hostname"), [
    ("My Server_1.example", "my-server-1-example"),
    ("ÄÖü ünïcode ✓ x", "äöü-ünïcode--x"),  # latin-1 letters stay, lower-cased; the rest goes
    ("...--__", f"Server-{UUID}"),
    ("日本語", f"Server-{UUID}"),
    ("a" * 70, "a" * 63),
    ("x" * 60 + " b_c", "x" * 60 + "-b"),  # cut to 63 before cleaning, then stripped
    ("-Lead.Trail-", "lead-trail"),
    ("Ünï_₤€$%&*()end", "ünï-end"),
])
def test_hostname_of_a_display_name(display_name, hostname):
    assert names.hostname_for(display_name, UUID) == hostname


def test_several_servers_of_one_request_are_numbered_from_one():
    assert [names.hostname_for("multi", UUID, count=2, index=i) for i in range(2)] == ["multi-1", "multi-2"]
    assert [names.display_name_for("multi", count=2, index=i) for i in range(2)] == ["multi-1", "multi-2"]
    assert names.display_name_for("solo") == "solo"
    # a name that gives no hostname is not numbered: the uuid already tells servers apart
    assert names.hostname_for("日本語", UUID, count=3, index=2) == f"Server-{UUID}"


def test_reservation_ids_look_like_nova_s():
    ids = {names.new_reservation_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"r-[0-9a-z]{8}", r) for r in ids)


def test_host_id_as_the_recorded_exchanges_show_it():
    recorded = json.loads(shared_path("reference/nova/servers-exchanges.json").read_text())
    checked = 0
    for exchange in recorded["exchanges"]:
        body = exchange.get("body")
        server = body.get("server") if isinstance(body, dict) else None
        if not server or "OS-EXT-SRV-ATTR:host" not in server:
            continue
        assert names.host_id(server["OS-EXT-SRV-ATTR:host"], server["tenant_id"]) == server["hostId"], exchange["step"]
        checked += 1
    assert checked >= 1
    assert names.host_id("compute1", "demo") == "2b64589406850361fc953a920f48f5d20e5436ef50300112c1f55134"
    assert names.host_id(None, "demo") == "" and names.host_id("", "demo") == ""
