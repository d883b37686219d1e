"""The real ``openstack`` CLI on key pairs, quotas and limits against a real ``openkeel-compute serve``.

``openstack keypair create`` makes a key and imports its public half;
``quota set`` / ``quota show --compute`` and ``limits show --absolute`` read what the API keeps.
"""

from __future__ import annotations

import pytest

from tests.clients.cli import Cli


@pytest.fixture(scope="module")
def cli(server, tmp_path_factory):
    return Cli(server, tmp_path_factory.mktemp("cli-keypairs"))


def test_keypair_create_list_show_delete(cli, server):
    made = cli.run("keypair", "create", "cli-kp")  # prints the private key, shown only this once
    assert made.returncode == 0, made.stderr
    assert "PRIVATE KEY-----" in made.stdout  # the CLI makes the key and imports its public half
    listed = cli.ok("keypair", "list", "-f", "json")
    assert [k["Name"] for k in listed] == ["cli-kp"]
    assert server.api.get("/os-keypairs/cli-kp")[1]["keypair"]["fingerprint"] == listed[0]["Fingerprint"]
    cli.ok("keypair", "delete", "cli-kp")
    assert cli.ok("keypair", "list", "-f", "json") == []
    refused = cli.run("keypair", "delete", "cli-kp")
    assert refused.returncode != 0


def test_quota_set_and_show_and_absolute_limits(cli, server):
    cli.ok("quota", "set", "--cores", "7", "--instances", "3", "admin")
    shown = {r["Resource"]: r["Limit"] for r in cli.ok("quota", "show", "--compute", "-f", "json", "admin")}
    assert (shown["cores"], shown["instances"], shown["ram"]) == (7, 3, 51200)
    assert server.api.get("/os-quota-sets/admin")[1]["quota_set"]["cores"] == 7
    # The CLI sends ?reserved=False, which Nova refuses from 2.75 (strict query): so does OpenKeel.
    refused = cli.run("limits", "show", "--absolute", "-f", "json")
    assert refused.returncode != 0
    assert "Additional properties are not allowed ('reserved' was unexpected)" in refused.stderr
    status, body = server.api.get("/limits", version="2.74")
    assert status == 200
    limits = body["limits"]["absolute"]
    assert (limits["maxTotalCores"], limits["maxTotalInstances"], limits["totalCoresUsed"]) == (7, 3, 0)
