"""The scripts/serve stack the console tests share (one start for the package)."""

from __future__ import annotations

import pytest

from openkeel_compute.images import local
from tests.consoles.stack import ConsoleStack


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    stack = ConsoleStack(tmp_path_factory.mktemp("consoles")).start()
    try:
        status, _ = stack.call("POST", "/v2.1/flavors", {"flavor": {"name": "m1.console", "ram": 512, "vcpus": 1,
                                                                     "disk": 1, "id": "console"}})
        assert status == 200
        yield stack
    finally:
        if stack.proc.poll() is None:
            stack.stop()


def boot(stack, name: str) -> str:
    status, body = stack.call("POST", "/v2.1/servers", {"server": {
        "name": name, "flavorRef": "console", "imageRef": local.DEFAULT_IMAGE_ID, "networks": "none"}},
        token="demo:demo")
    assert status == 202, body
    stack.wait_status(body["server"]["id"], "ACTIVE", timeout=60, token="demo:demo")
    return body["server"]["id"]


