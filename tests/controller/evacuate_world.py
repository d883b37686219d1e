"""The world the evacuation tests share: the API, the controller (with Placement claims) and the built-in
cluster with three nodes, on one database engine; the nodes published as compute services; helpers that
take a node down, force its service down and drive the controller."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from oslo_messaging.notify import _impl_test as in_memory_driver

from openkeel_compute import policies
from openkeel_compute.controller import compute_services, evacuations, nodes, providers
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import gateway_from, server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.notifications import sender, server_events
from tests.conftest import admin, make_conf
from tests.databases import throwaway_database
from tests.server_world import DEMO, IMAGE, image_service, server_world, until

NODES = ("emulated-node-1", "emulated-node-2", "emulated-node-3")


class World:
    def __init__(self, client: Any, controller: Any, cluster: Any, conf: Any, engine: Any, gateway: Any) -> None:
        self.client, self.controller, self.cluster = client, controller, cluster
        self.conf, self.engine, self.gateway = conf, engine, gateway

    @property
    def claims(self):
        return self.controller.servers.claims

    def beat(self) -> list[str]:
        """One heartbeat of the controller: the nodes as services and providers (a forced-down node's
        disabled), then the sources back (evacuations)."""
        nodes.sync(self.engine, self.gateway)
        compute_services.heartbeat(self.engine, self.gateway)
        down, member_of = compute_services.placement_view(self.engine)
        providers.sync(self.claims.placement, self.gateway.nodes(), down=down, member_of=member_of)
        return evacuations.source_back(self.engine, self.claims, self.gateway)

    def flavor(self, flavorid: str = "small", ram: int = 512, disk: int = 1) -> None:
        got = self.client.post("/v2.1/flavors", headers=admin(), json_body={
            "flavor": {"name": f"m1.{flavorid}", "ram": ram, "vcpus": 1, "disk": disk, "id": flavorid}})
        assert got.status_code == 200, got.text

    def boot(self, name: str = "evac", flavor: str = "small", hints: dict | None = None) -> dict:
        body: dict[str, Any] = {"server": {"name": name, "imageRef": IMAGE, "flavorRef": flavor, "networks": "none"}}
        if hints:
            body["os:scheduler_hints"] = hints
        got = self.client.post("/v2.1/servers", headers=DEMO, json_body=body)
        assert got.status_code == 202, got.text
        return self.wait(got.json["server"]["id"], "ACTIVE")

    def server(self, uuid: str) -> dict:
        return self.client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]

    def wait(self, uuid: str, status: str) -> dict:
        got = until(self.client, self.controller, uuid, lambda g: g.json["server"]["status"] == status
                    and g.json["server"]["OS-EXT-STS:task_state"] is None)
        assert got.json["server"]["status"] == status, got.json["server"]
        return self.server(uuid)

    def service(self, host: str) -> dict:
        got = self.client.get(f"/v2.1/os-services?host={host}", headers=admin("2.53"))
        (service,) = got.json["services"]
        return service

    def node_down(self, host: str, *, force: bool = True) -> None:
        """The node stops being Ready and (``force``) its service is forced down, as an operator fencing it."""
        self.cluster.set_node_ready(host, "Unknown")
        if force:
            got = self.client.put(f"/v2.1/os-services/{self.service(host)['id']}", headers=admin("2.53"),
                                  json_body={"forced_down": True})
            assert got.status_code == 200, got.text
        self.beat()

    def evacuate(self, uuid: str, body: dict | None = None, version: str = "2.14"):
        return self.client.post(f"/v2.1/servers/{uuid}/action", headers=admin(version),
                                json_body={"evacuate": body or {}})

    def migrations(self, uuid: str) -> list[dict]:
        got = self.client.get(f"/v2.1/os-migrations?instance_uuid={uuid}", headers=admin("2.80"))
        return got.json["migrations"]

    def events(self, uuid: str, action: str) -> list[tuple[str, str]]:
        actions = self.client.get(f"/v2.1/servers/{uuid}/os-instance-actions",
                                  headers=admin("2.96")).json["instanceActions"]
        request_id = next(a["request_id"] for a in actions if a["action"] == action)
        got = self.client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{request_id}", headers=admin("2.96"))
        return sorted((e["event"], e["result"]) for e in got.json["instanceAction"]["events"])

    def allocations(self, uuid: str) -> set[str]:
        """The nodes the server's consumer holds resources on."""
        held = self.claims.placement.get_allocations(uuid).allocations
        return {self.claims.node_of(rp) for rp in held}

    def pods_on(self, node: str, uuid: str) -> list[str]:
        return [k[1] for k, pod in self.cluster.objects("Pod").items()
                if (pod.get("spec") or {}).get("nodeName") == node
                and uuid in str((pod.get("metadata") or {}).get("labels"))]


@contextlib.contextmanager
def evacuate_world(engine_name: str, tmp_path, placement_url: str, *, notifying: bool = False,
                   cinder_url: str | None = None, filters: list[str] | None = None,
                   filter_options: dict[str, str] | None = None) -> Iterator[World]:
    """``notifying``: both notification formats go to oslo.messaging's in-memory driver; ``cinder_url``: the
    (fake) Cinder the API and the controller use; ``filters``: [filter_scheduler] enabled_filters;
    ``filter_options``: [filter_scheduler]'s other options."""
    policies.reset()
    extra: dict[str, Any] = {}
    if filters is not None or filter_options:
        extra["filter_scheduler"] = dict(filter_options or {})
    if filters is not None:
        extra["filter_scheduler"]["enabled_filters"] = ",".join(filters)
    if cinder_url:
        extra["cinder"] = {"auth_type": "admin_token", "endpoint": cinder_url, "token": "cinder-admin",
                           "endpoint_template": cinder_url + "/v3/%(project_id)s"}
    if notifying:
        in_memory_driver.reset()
        extra.update({"DEFAULT": {"host": "fake-mini"}, "notifications": {"notification_format": "both"},
                      "oslo_messaging_notifications": {"driver": "test", "transport_url": "fake:/"}})
    with throwaway_database(engine_name, tmp_path) as url, image_service(tmp_path) as glance_url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "2"},
                         glance={"api_servers": glance_url}, database={"connection": url}, **extra)
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube), placement_url,
                          nodes=len(NODES)) as (client, controller, cluster):
            gateway = gateway_from(conf, make_client(cluster.kubeconfig()))
            try:
                world = World(client, controller, cluster, conf, engine, gateway)
                world.beat()
                world.flavor()
                yield world
            finally:
                gateway.close()
                if notifying:
                    server_events.install(None)
                    sender.close_all(0)
                    in_memory_driver.reset()


def notifications() -> list[tuple[str, str]]:
    """(event type, publisher) of what the in-memory driver got so far."""
    assert sender.drain_all(10)
    return [(m["event_type"], m["publisher_id"]) for _ctx, m, _priority, _retry in in_memory_driver.NOTIFICATIONS]
