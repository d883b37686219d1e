"""WSGI entry point for servers: ``openkeel_compute.wsgi:application``.

Configuration files come from $OPENKEEL_CONFIG_FILES (os.pathsep-separated), which
`openkeel-compute serve` sets for its workers. Importing this module builds the application.
"""

from __future__ import annotations

import os

from openkeel_compute.startup import collector_paused


def _load():
    from openkeel_compute.api.deploy import deploy
    from openkeel_compute.cmd.common import setup_logging
    from openkeel_compute.conf import build_conf

    files = [p for p in os.environ.get("OPENKEEL_CONFIG_FILES", "").split(os.pathsep) if p]
    argv: list[str] = []
    for path in files:
        argv += ["--config-file", path]
    conf = build_conf(argv)
    setup_logging(conf.debug)
    return deploy(conf)


# The imports and the app are built with the collector paused, then frozen (openkeel_compute.startup).
with collector_paused():
    application = _load()
