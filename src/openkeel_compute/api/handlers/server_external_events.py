"""POST /os-server-external-events: what other services tell Nova about servers, answered as Nova
34.0.0 answers (policy os_compute_api:os-server-external-events:create, service or admin).

Each event is answered on its own: 200 "completed" when accepted (the server exists and is on a
host), 404 for an unknown or deleted server, 422 for a server not on a host yet, 400 for a
volume-extended, power-update or accelerator-request-bound without its tag (volume-reimaged needs none:
one without a tag is accepted and then matches no wait, as in Nova); the whole answer is 200 when all were accepted,
207 otherwise, even when none was (Nova 34 no longer answers 404 then). The event names grow with
the microversion: volume-extended at 2.51, power-update at 2.76, accelerator-request-bound at 2.82,
volume-reimaged at 2.93. Accepted events are recorded for the controller (compute/external_events.py).
"""

from __future__ import annotations

import copy
import logging

from openkeel_compute.api import common
from openkeel_compute.api.handlers.server_common import actor_of
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import external_events
from openkeel_compute.compute.instances import instance_actions
from openkeel_compute.policies import contract as rules

LOG = logging.getLogger(__name__)

STATUSES = ["failed", "completed", "in-progress"]
#: the events refused (400) without a tag, as Nova's TAG_REQUIRED
TAG_REQUIRED = ("volume-extended", "power-update", "accelerator-request-bound")
NAMES = ["network-changed", "network-vif-plugged", "network-vif-unplugged", "network-vif-deleted"]


def _schema(names: list[str]) -> dict:
    return {
        "type": "object",
        "properties": {"events": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": list(names)},
                "server_uuid": {"type": "string", "format": "uuid"},
                "status": {"type": "string", "enum": STATUSES},
                "tag": {"type": "string", "maxLength": 255},
            },
            "required": ["name", "server_uuid"],
            "additionalProperties": False,
        }}},
        "required": ["events"],
        "additionalProperties": False,
    }


BODY = {
    "2.0-2.50": _schema(NAMES),
    "2.51-2.75": _schema([*NAMES, "volume-extended"]),
    "2.76-2.81": _schema([*NAMES, "volume-extended", "power-update"]),
    "2.82-2.92": _schema([*NAMES, "volume-extended", "power-update", "accelerator-request-bound"]),
    "2.93-": _schema([*NAMES, "volume-extended", "power-update", "accelerator-request-bound", "volume-reimaged"]),
}


@operation(body=BODY, success=200, expected=(403,))
def create(req):
    common.can(req, rules.EXTERNAL_EVENTS % "create", {})
    answered = copy.deepcopy(req.body["events"])
    with common.read(req) as conn:
        hosts = external_events.servers(conn, (e["server_uuid"] for e in answered))
    accepted = []
    result = 200
    for event in answered:
        name, tag, uuid = event["name"], event.get("tag"), event["server_uuid"]
        if uuid not in hosts:
            LOG.debug("Dropping event %s:%s for unknown instance %s", name, tag, uuid)
            event.update(status="failed", code=404)
            result = 207
        elif name in TAG_REQUIRED and tag is None:
            event.update(status="failed", code=400)
            result = 207
        elif hosts[uuid]:
            accepted.append({"instance_uuid": uuid, "name": name, "status": event.get("status", "completed"),
                             "tag": tag, "host": hosts[uuid]})
            LOG.info("Creating event %s:%s for instance %s on %s", name, tag, uuid, hosts[uuid])
            event.update(status="completed", code=200)
        else:
            event.update(status="failed", code=422)
            result = 207
    if accepted:
        actor = actor_of(req)
        with common.write(req) as conn:
            external_events.record(conn, accepted)
            for event in accepted:  # Nova's API: the user follows a Cinder extend as an instance action
                if event["name"] == "volume-extended":
                    instance_actions.start_action(conn, event["instance_uuid"], "extend_volume", actor)
    return Response({"events": answered}, status=result)
