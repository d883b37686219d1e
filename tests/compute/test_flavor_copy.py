"""The flavor copy is Nova's instance_extra.flavor text."""

from __future__ import annotations

import datetime as dt
import json

from openkeel_compute.compute import flavor_copy

ROW = {"id": 3, "name": "small", "memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "flavorid": "f1",
       "swap": 0, "rxtx_factor": 1.0, "vcpu_weight": None, "disabled": False, "is_public": True,
       "description": "d", "created_at": dt.datetime(2026, 12, 1, 9, 0, 0), "updated_at": None}

# Nova 34.0.0's Flavor 1.2 serialised (obj_to_primitive) for the same flavor, with the
# description nulled as Nova stores it with an instance.
NOVA = {"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
        "nova_object.data": {"created_at": "2026-12-01T09:00:00Z", "deleted": False, "deleted_at": None,
                             "description": None, "disabled": False, "ephemeral_gb": 0, "extra_specs": {"a": "b"},
                             "flavorid": "f1", "id": 3, "is_public": True, "memory_mb": 512, "name": "small",
                             "root_gb": 1, "rxtx_factor": 1.0, "swap": 0, "updated_at": None, "vcpu_weight": None,
                             "vcpus": 1}}


def test_the_primitive_is_nova_s():
    assert flavor_copy.primitive(ROW, {"a": "b"}) == NOVA


def test_the_column_reads_back_with_old_and_new():
    cur = flavor_copy.primitive(ROW, {})
    new = flavor_copy.primitive(dict(ROW, id=4, flavorid="f2", memory_mb=1024), {"x": "y"})
    text = flavor_copy.dumps(cur, old=cur, new=new)
    assert set(json.loads(text)) == {"cur", "old", "new"}
    copy = flavor_copy.FlavorCopy.loads(text)
    assert copy.cur["flavorid"] == "f1" and copy.old["flavorid"] == "f1" and copy.new["memory_mb"] == 1024
    assert copy.sizes() == {"memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "instance_type_id": 3}
    assert flavor_copy.FlavorCopy.loads(flavor_copy.dumps(cur)).old is None


def test_very_old_rows_without_disabled_and_is_public_read_as_nova_reads_them():
    cur = flavor_copy.primitive(ROW, {})
    del cur["nova_object.data"]["disabled"], cur["nova_object.data"]["is_public"]
    copy = flavor_copy.FlavorCopy.loads(json.dumps({"cur": cur, "old": None, "new": None}))
    assert copy.cur["disabled"] is False and copy.cur["is_public"] is True
