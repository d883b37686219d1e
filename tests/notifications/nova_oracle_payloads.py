"""Run by the Nova oracle's own Python (not by pytest): print the FlavorPayloads Nova builds.

Reads ``[{"action": "create|update|delete", "flavor": {...}}, ...]`` on stdin, loads each
flavor into a real ``nova.objects.Flavor`` the way Nova does at the moment it notifies
(through ``_from_db_object``, with the collections Nova has loaded for that action) and
writes the list of ``FlavorPayload.obj_to_primitive()`` results as JSON on stdout.
"""

from __future__ import annotations

import datetime
import json
import sys

import oslo_messaging
from nova import objects, rpc
from nova.conf import CONF
from nova.notifications.objects import flavor as flavor_notification

# Collections present on Nova's Flavor object when each event is emitted.
LOADED_BY_ACTION = {"create": ["projects"], "update": ["extra_specs", "projects"], "delete": []}


def database_row(flavor: dict) -> dict:
    """The flavor as Nova's API database hands it to ``Flavor._from_db_object``."""
    row = {key: value for key, value in flavor.items() if key not in ("extra_specs", "projects")}
    now = datetime.datetime(2026, 1, 1)
    row.update(id=1, created_at=now, updated_at=None, deleted_at=None, deleted=False)
    row["extra_specs"] = dict(flavor.get("extra_specs") or {})
    row["projects"] = [{"project_id": project} for project in flavor.get("projects") or []]
    return row


def main() -> None:
    objects.register_all()
    CONF([], project="nova")
    CONF.set_override("notification_format", "versioned", group="notifications")
    # populate_schema only runs when a versioned notifier is enabled.
    transport = oslo_messaging.get_notification_transport(CONF, url="fake:/")
    rpc.NOTIFIER = oslo_messaging.Notifier(transport, driver="test")

    payloads = []
    for case in json.load(sys.stdin):
        flavor = objects.Flavor._from_db_object(
            None,
            objects.Flavor(),
            database_row(case["flavor"]),
            expected_attrs=LOADED_BY_ACTION[case["action"]],
        )
        payloads.append(flavor_notification.FlavorPayload(flavor).obj_to_primitive())
    json.dump(payloads, sys.stdout)


if __name__ == "__main__":
    main()
