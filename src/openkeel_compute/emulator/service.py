"""The built-in cluster for ``openkeel-compute controller`` when ``[controller] driver = emulated``."""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import yaml

from openkeel_compute.cmd.common import OperatorError
from openkeel_compute.emulator.lifecycle import Delays
from openkeel_compute.emulator.persist import StateError
from openkeel_compute.emulator.server import Emulator

LOG = logging.getLogger(__name__)


@contextlib.contextmanager
def emulated_cluster(conf: Any) -> Iterator[str]:
    """Start the emulator from [controller] options; yields the path of the kubeconfig that reaches it."""
    c = conf.controller
    state_dir = c.emulator_state_dir or None
    try:
        emulator = Emulator(host=c.emulator_host, port=c.emulator_port, delays=Delays.from_scale(c.emulator_delay_scale),
                            nodes=c.emulator_nodes, state_dir=state_dir, read_images=c.emulator_read_images,
                            guest_ssh_port=c.emulator_guest_ssh_port or None).start()
    except StateError as exc:
        raise OperatorError(str(exc)) from None
    if emulator.restored:
        LOG.info("built-in KubeVirt cluster: %d objects read back from %s (resource version %d)",
                 emulator.restored, state_dir, emulator.store.rv)
    elif state_dir:
        LOG.info("built-in KubeVirt cluster: new, kept in %s", state_dir)
    path = pathlib.Path(c.emulator_kubeconfig)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(emulator.kubeconfig(), sort_keys=False))
        os.chmod(path, 0o600)
        LOG.info("built-in KubeVirt cluster listening on %s (kubeconfig %s)", emulator.url, path)
        yield str(path)
    finally:
        emulator.stop()
        with contextlib.suppress(OSError):
            path.unlink()
