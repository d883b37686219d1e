"""controller/steps/ports.py on its own against the in-memory Neutron over HTTP: a server's ports follow
it to the node a resize, a revert or a start moved it to (Nova's migrate_instance_finish), and the
addresses the network info gives. Runs on every database engine (the network info is server state)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from openkeel_compute.compute import network_requests
from openkeel_compute.controller.steps import ports
from openkeel_compute.controller.steps.base import read_server
from openkeel_compute.db import api as db_api
from openkeel_compute.network.client import NeutronClient
from tests.conftest import make_conf
from tests.controller.helpers import boot, row_of
from tests.network.fake_neutron import FakeNeutron


@pytest.fixture
def neutron():
    fake = FakeNeutron()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def with_neutron(ctx, neutron, tmp_path):
    conf = make_conf(tmp_path, neutron={"auth_type": "admin_token", "endpoint": neutron.url, "token": "t",
                                        "endpoint_override": neutron.url})
    return dataclasses.replace(ctx, network=NeutronClient(conf))


def _server(ctx, neutron, node="node-1"):
    net = neutron.network(name="private", project_id="project-1")
    uuid = boot(ctx.engine, requested_networks="requested")
    with db_api.transaction(ctx.engine) as conn:
        network_requests.record(conn, uuid, [{"position": 0, "network_id": net["id"]}])
    server = read_server(ctx.engine, uuid)
    server["node"] = server["host"] = node
    return server


def test_ports_follow_the_server_to_its_new_node(with_neutron, neutron):
    server = _server(with_neutron, neutron)
    (vif,) = ports.allocate(with_neutron, server)
    assert neutron.ports[vif["port_id"]]["binding:host_id"] == "node-1"
    ports.follow(with_neutron, read_server(with_neutron.engine, server["uuid"]), "node-2")
    assert neutron.ports[vif["port_id"]]["binding:host_id"] == "node-2"
    stored = ports.info_of(read_server(with_neutron.engine, server["uuid"]))
    assert [v["host"] for v in stored] == ["node-2"]


def test_a_server_on_the_pod_network_asks_neutron_nothing(ctx, neutron):
    server = _server(ctx, neutron)  # ctx without [neutron]
    ports.follow(ctx, server, "node-2")
    assert neutron.requests == []
    assert not ports.wanted(ctx, server)


def test_addresses_are_the_ports_fixed_then_floating_ips(with_neutron, neutron):
    server = _server(with_neutron, neutron)
    (vif,) = ports.allocate(with_neutron, server)
    row = row_of(with_neutron.engine, server["uuid"])
    fixed = neutron.ports[vif["port_id"]]["fixed_ips"][0]["ip_address"]
    assert json.loads(row["network_info"]) == {"private": [
        {"version": 4, "addr": fixed, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": vif["mac"]}]}
    assert ports.addresses([{**vif, "floating_ips": ["2001:db8::5"]}])["private"][1] == {
        "version": 6, "addr": "2001:db8::5", "OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": vif["mac"]}
