from __future__ import annotations

import threading
import types

import pytest
from oslo_config import cfg

from openkeel_compute.images import glance, local


@pytest.fixture
def image_dir(tmp_path):
    return tmp_path / "images"


@pytest.fixture
def local_service(image_dir):
    """The development image service on a free port, serving ``image_dir``; yields its URL."""
    image_dir.mkdir(exist_ok=True)
    server = local.serve(str(image_dir), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def make_client(**glance_opts) -> glance.GlanceClient:
    conf = cfg.ConfigOpts()
    conf([], project="openkeel-compute")
    client = glance.GlanceClient(conf)
    for name, value in glance_opts.items():
        conf.set_override(name, value, group="glance")
    client.retry_delay = 0.01
    return client


def context(token="demo:demo"):
    return types.SimpleNamespace(auth_token=token, user_id="demo", project_id="demo", environ={})
