"""The openstack CLI's operator commands against a real ``scripts/serve`` (API, controller on its built-in
cluster): compute service list/set, hypervisor list/show/stats, aggregate create/add host/set --zone and
server group create/list/show/delete, as an operator runs them."""

from __future__ import annotations

import time

import pytest

from tests.clients.test_servers_cli import Cli


@pytest.fixture(scope="module")
def cli(stack):
    return Cli(stack)


def _services(cli, timeout: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        services = cli.ok("compute", "service", "list", "-f", "json")
        if services or time.monotonic() > deadline:
            return services
        time.sleep(1)


def test_services_hypervisors_aggregates_and_groups(cli):
    services = _services(cli)
    assert services and {s["Binary"] for s in services} == {"nova-compute"}
    host = services[0]["Host"]
    assert services[0]["State"] == "up" and services[0]["Status"] == "enabled"
    cli.ok("compute", "service", "set", "--disable", "--disable-reason", "maintenance", host, "nova-compute")
    got = cli.ok("compute", "service", "list", "--host", host, "--long", "-f", "json")[0]
    assert (got["Status"], got["Disabled Reason"]) == ("disabled", "maintenance")
    cli.ok("compute", "service", "set", "--enable", host, "nova-compute")
    hypervisors = cli.ok("hypervisor", "list", "-f", "json")
    assert [h["Hypervisor Hostname"] for h in hypervisors] == [s["Host"] for s in services]
    shown = cli.ok("hypervisor", "show", hypervisors[0]["ID"], "-f", "json")
    assert shown["hypervisor_type"] == "KubeVirt"
    cli.ok("aggregate", "create", "--zone", "cli-zone", "cli-agg")
    added = cli.ok("aggregate", "add", "host", "cli-agg", host, "-f", "json")
    assert added["hosts"] == [host]
    cli.ok("aggregate", "remove", "host", "cli-agg", host)
    cli.ok("aggregate", "delete", "cli-agg")
    group = cli.ok("server", "group", "create", "--policy", "anti-affinity", "cli-group", "-f", "json")
    assert group["policy"] == "anti-affinity"
    assert "cli-group" in cli.ok("server", "group", "list")
    assert cli.ok("server", "group", "show", group["id"], "-f", "json")["name"] == "cli-group"
    cli.ok("server", "group", "delete", group["id"])
