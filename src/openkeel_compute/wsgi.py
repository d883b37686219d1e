"""WSGI entry point for servers: ``openkeel_compute.wsgi:application``.

Configuration files come from $OPENKEEL_CONFIG_FILES (os.pathsep-separated), which
`openkeel-compute serve` sets for its workers.
"""

from __future__ import annotations

import os

from openkeel_compute.api.deploy import deploy
from openkeel_compute.cmd.common import setup_logging
from openkeel_compute.conf import build_conf


def _load():
    files = [p for p in os.environ.get("OPENKEEL_CONFIG_FILES", "").split(os.pathsep) if p]
    argv: list[str] = []
    for path in files:
        argv += ["--config-file", path]
    conf = build_conf(argv)
    setup_logging(conf.debug)
    return deploy(conf)


application = _load()
