"""A server's delete when the controller has no [cinder]: only a mapping with a volume is worth the warning
that its volumes are not given back; an image boot's local disk mapping is no volume."""

from __future__ import annotations

import contextlib
import logging
import types

import pytest

from openkeel_compute.controller.steps import volumes
from openkeel_compute.model import sysmeta

IMAGE_ROW = {"volume_id": None, "attachment_id": None, "source_type": "image", "destination_type": "local",
             "delete_on_termination": True}
VOLUME_ROW = {**IMAGE_ROW, "volume_id": "a5b1c2d3-0000-4000-8000-000000000001", "source_type": "volume",
              "destination_type": "volume", "delete_on_termination": False}


@pytest.mark.parametrize(("rows", "warned"), [([IMAGE_ROW], False), ([IMAGE_ROW, VOLUME_ROW], True)])
def test_the_warning_names_volumes_only(monkeypatch, caplog, rows, warned):
    deleted = []
    monkeypatch.setattr(volumes, "reader", lambda engine: contextlib.nullcontext("conn"))
    monkeypatch.setattr(volumes, "transaction", lambda engine: contextlib.nullcontext("conn"))
    monkeypatch.setattr(volumes.block_device_rows, "of", lambda conn, uuid: rows)
    monkeypatch.setattr(volumes.block_device_rows, "delete_all", lambda conn, uuid: deleted.append(uuid))
    ctx = types.SimpleNamespace(engine=None, volumes=None)
    with caplog.at_level(logging.WARNING, logger=volumes.LOG.name):
        volumes.on_delete(ctx, "s-1", {"system_metadata": {sysmeta.HAS_BLOCK_DEVICES: "True"}})
    assert ("not given back" in caplog.text) is warned
    assert deleted == ["s-1"]
