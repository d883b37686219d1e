"""Run by the Nova oracle's own Python (not by pytest): print the key pair notifications Nova sends.

Reads ``[{"action": "create|import|delete", "phase": "start|end", "keypair": {...}}, ...]`` on stdin,
sends each through Nova's own ``notify_about_keypair_action`` (host ``fake-mini``) into oslo.messaging's
in-memory driver, and writes ``[{"event_type", "publisher_id", "priority", "payload"}, ...]`` as JSON.
"""

from __future__ import annotations

import json
import sys

import oslo_messaging
from nova import context as nova_context
from nova import objects, rpc
from nova.compute import utils as compute_utils
from nova.conf import CONF
from oslo_messaging.notify import _impl_test as in_memory_driver


def main() -> None:
    objects.register_all()
    CONF([], project="nova")
    CONF.set_override("notification_format", "versioned", group="notifications")
    CONF.set_override("host", "fake-mini")
    transport = oslo_messaging.get_notification_transport(CONF, url="fake:/")
    rpc.NOTIFIER = oslo_messaging.Notifier(transport, driver="test", serializer=rpc.RequestContextSerializer(None))
    context = nova_context.RequestContext(user_id="fake", project_id="fake")
    for case in json.load(sys.stdin):
        keypair = objects.KeyPair(context, **case["keypair"])
        compute_utils.notify_about_keypair_action(context, keypair, case["action"], case["phase"])
    json.dump([{"event_type": message["event_type"], "publisher_id": message["publisher_id"],
                "priority": priority, "payload": message["payload"]}
               for _context, message, priority, _retry in in_memory_driver.NOTIFICATIONS], sys.stdout)


if __name__ == "__main__":
    main()
