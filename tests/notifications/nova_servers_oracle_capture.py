"""Run by the servers oracle's own Python (not by pytest): the Nova servers oracle, plus a way to read
the notifications it sent.

Starts ../shared/nova-oracle/servers_oracle.py unchanged (same arguments, e.g. ``--port P -- --flag
notifications.notify_on_state_change=vm_and_task_state``) and adds one route to its HTTP server:
``GET /__notifications`` answers ``{"versioned": [...], "legacy": [...]}``, every notification Nova's
services sent since the last ``DELETE /__notifications`` (which empties both lists). Nova's
functional-test environment captures them in memory (its NotificationFixture) instead of sending them.

Usage: python nova_servers_oracle_capture.py SERVERS_ORACLE_PY [servers_oracle.py arguments...]
"""

from __future__ import annotations

import os
import sys

ORACLE_SCRIPT = sys.argv[1]
sys.argv = [ORACLE_SCRIPT, *sys.argv[2:]]
sys.path.insert(0, os.path.dirname(ORACLE_SCRIPT))

import servers_oracle  # the oracle parses sys.argv when imported

_ORACLES: list = []
_set_up = servers_oracle.ServersOracle.setUp


def _remember(self):  # the oracle object lives in main(): keep a reference to read its fixture
    _set_up(self)
    _ORACLES.append(self)


servers_oracle.ServersOracle.setUp = _remember
_make_server = servers_oracle.simple_server.make_server


def _legacy(message) -> dict:
    from oslo_serialization import jsonutils

    return {"publisher_id": message.publisher_id, "priority": message.priority,
            "event_type": message.event_type, "payload": jsonutils.to_primitive(message.payload,
                                                                                 convert_instances=True)}


def _with_capture(host, port, app, **kwargs):
    def capture(environ, start_response):
        if environ.get("PATH_INFO") != "/__notifications":
            return app(environ, start_response)
        fixture = _ORACLES[-1].notifier
        if environ["REQUEST_METHOD"] == "DELETE":
            fixture.reset()
            start_response("204 No Content", [])
            return [b""]
        from oslo_serialization import jsonutils

        body = jsonutils.dumps({"versioned": list(fixture.versioned_notifications),
                                "legacy": [_legacy(m) for m in fixture.notifications]}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return _make_server(host, port, capture, **kwargs)


servers_oracle.simple_server.make_server = _with_capture
servers_oracle.main()
