"""Loaded by ``tempest run`` in the conformance tier (this directory is put on its PYTHONPATH).

Tempest 47.0.0 sets ``create_default_network = True`` on many compute test classes, and
``BaseV2ComputeTest.skip_checks`` then skips the whole class when Neutron is not available. The
flag only asks dynamic credentials for a network to boot on; OpenKeel boots servers on the
cluster's pod network without Neutron. Here the check runs as if the flag were unset, so those
classes run, or skip for their own reasons. Nothing else in Tempest changes: with Neutron absent
no network is created and Tempest sends no ``networks`` (``none`` from 2.37).

Set OPENKEEL_TEMPEST_NETWORK_SHIM=0 to run Tempest unchanged.

Tempest 47.0.0's ``LiveMigrationRemoteConsolesV26Test._verify_console_interaction`` is Python 2 code: it hands
``_WebSocket.send_frame`` a ``str`` (whose ``int(data[i])`` raises ValueError on the first letter) and adds the
``bytes`` ``receive_frame`` returns to a ``str``, so ``test_live_migration_serial_console`` fails against any
cloud, Nova's included (upstream gates leave ``serial_console`` off). Its live migration then reads
``self.block_migration``, which only ``LiveMigrationTest`` defines (``_migrate_server_to`` asks
``getattr(self, 'block_migration', None)`` and then the attribute itself: AttributeError). Here the same
interaction runs with the line encoded and the replies decoded (the same URL, websocket, line, 120 s and
assertion) and the class gets ``block_migration = None``, the default that getattr means (the block migration
then follows ``block_migration_for_live_migration``, as for LiveMigrationTest). Set
OPENKEEL_TEMPEST_SERIAL_SHIM=0 to run it unchanged.
"""

import os


def _install():
    try:
        from tempest.api.compute import base
    except ImportError:  # not Tempest's interpreter: nothing to do
        return
    original = base.BaseV2ComputeTest.skip_checks.__func__

    def skip_checks(cls):
        own = "create_default_network" in cls.__dict__
        saved = cls.__dict__.get("create_default_network")
        cls.create_default_network = False
        try:
            original(cls)
        finally:
            if own:
                cls.create_default_network = saved
            else:
                del cls.create_default_network

    base.BaseV2ComputeTest.skip_checks = classmethod(skip_checks)


def _install_serial():
    """Replaces the helper when the class sets up (its skip_checks): its module is not imported here, as it
    reads Tempest's configuration at import."""
    try:
        import time

        from tempest.api.compute import base
        from tempest.common import compute
    except ImportError:  # not Tempest's interpreter: nothing to do
        return

    def _verify_console_interaction(self, server_id):
        body = self.servers_client.get_remote_console(server_id, console_type='serial', protocol='serial')
        console_url = body['remote_console']['url']
        data = "test_live_migration_serial_console"
        console_output = ''
        t = 0.0
        interval = 0.1
        ws = compute.create_websocket(console_url)
        try:
            while data not in console_output and t <= 120.0:
                try:
                    ws.send_frame(data.encode())
                    received = ws.receive_frame()
                    console_output += (received or b'').decode(errors='replace')
                except Exception:  # noqa: BLE001 (Tempest's own loop: a new websocket after any failure)
                    ws = compute.create_websocket(console_url)
                time.sleep(interval)
                t += interval
        finally:
            ws.close()
        self.assertIn(data, console_output)

    original = base.BaseV2ComputeTest.skip_checks.__func__

    def skip_checks(cls):
        if cls.__name__ == "LiveMigrationRemoteConsolesV26Test" and \
                "_verify_console_interaction" in cls.__dict__:
            cls._verify_console_interaction = _verify_console_interaction
            if not hasattr(cls, "block_migration"):
                cls.block_migration = None
        original(cls)

    base.BaseV2ComputeTest.skip_checks = classmethod(skip_checks)


if os.environ.get("OPENKEEL_TEMPEST_NETWORK_SHIM", "1") == "1":
    _install()
if os.environ.get("OPENKEEL_TEMPEST_SERIAL_SHIM", "1") == "1":
    _install_serial()
