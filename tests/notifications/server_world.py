"""An OpenKeel cloud that sends its server notifications into oslo.messaging's in-memory driver, and the
operations the server notification tests drive on it (and on the Nova oracle, for the comparison)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from oslo_messaging.notify import _impl_test as in_memory_driver

from openkeel_compute import policies
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.images import glance
from openkeel_compute.notifications import sender, server_events
from tests.conftest import make_conf
from tests.databases import throwaway_database
from tests.server_world import image_service, server_world


@contextlib.contextmanager
def notifying_world(tmp_path, notification_format: str = "both", state_change: str | None = "vm_and_task_state",
                    reclaim: int = 0, database: str = "sqlite", bdms: bool = False) -> Iterator[tuple[Any, Any, Any]]:
    """(client, controller, messages): the API and the controller of one cloud, both notifying (``reclaim``:
    [DEFAULT] reclaim_instance_interval, deleted servers kept that long; ``bdms``: [notifications]
    bdms_in_notifications), on a new database of engine ``database`` (tests/databases.py)."""
    with throwaway_database(database, tmp_path) as url, \
            _notifying_world(tmp_path, notification_format, state_change, reclaim, url, bdms) as world:
        yield world


@contextlib.contextmanager
def _notifying_world(tmp_path, notification_format: str, state_change: str | None, reclaim: int,
                     database_url: str, bdms: bool = False) -> Iterator[tuple[Any, Any, Any]]:
    policies.reset()
    notifications = {"notification_format": notification_format, "bdms_in_notifications": str(bdms).lower()}
    if state_change:
        notifications["notify_on_state_change"] = state_change
    conf = make_conf(tmp_path, DEFAULT={"host": "fake-mini", "reclaim_instance_interval": str(reclaim)},
                     notifications=notifications,
                     oslo_messaging_notifications={"driver": "test", "transport_url": "fake:/"},
                     controller={"poll_interval": "0.05", "workers": "2"}, database={"connection": database_url})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    in_memory_driver.reset()
    with image_service(tmp_path) as url:
        glance.register_opts(conf)
        conf.set_override("api_servers", [url], group="glance")
        with server_world(conf, lambda kube: make_loop(kube, engine, reclaim_interval=float(reclaim))) as (client, controller, _cluster):
            yield client, controller, Messages()
    server_events.install(None)
    sender.close_all(0)
    in_memory_driver.reset()
    db_api.dispose_all()


class Messages:
    """What the in-memory driver got, once the background senders handed over what they hold."""

    def all(self) -> list[dict[str, Any]]:
        assert sender.drain_all(10)
        return [{"event_type": m["event_type"], "publisher_id": m["publisher_id"], "priority": priority,
                 "payload": m["payload"]} for _ctx, m, priority, _retry in in_memory_driver.NOTIFICATIONS]

    def clear(self) -> None:
        assert sender.drain_all(10)
        in_memory_driver.reset()

    def versioned(self) -> list[dict[str, Any]]:
        return [m for m in self.all() if not m["event_type"].startswith("compute.")]

    def legacy(self) -> list[dict[str, Any]]:
        return [m for m in self.all() if m["event_type"].startswith("compute.")]
