"""The flavor a server keeps: Nova's instance_extra.flavor JSON ({"cur", "old", "new"}).

A server shows the flavor it was built with (2.47+: its sizes, ``original_name`` and extra specs;
before: the flavor id and its link) whatever later happens to the flavor, so the copy is frozen
at boot. ``old`` and ``new`` hold the two flavors of a resize in progress. Each entry is the
serialised Flavor object as Nova stores it, so the same text reads back in either system; the
description is never kept (Nova stores it as null).
"""

from __future__ import annotations

import datetime as dt
import json

_FIELDS = ("id", "name", "memory_mb", "vcpus", "root_gb", "ephemeral_gb", "flavorid", "swap",
           "rxtx_factor", "vcpu_weight", "disabled", "is_public")


def _iso(value):
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")  # as Nova serialises object datetimes
    return value


def primitive(flavor: dict, extra_specs: dict[str, str]) -> dict:
    """A flavor row (the catalogue's columns) and its extra specs as a serialised Flavor 1.2."""
    data = {name: flavor[name] for name in _FIELDS}
    data["rxtx_factor"] = float(data["rxtx_factor"]) if data["rxtx_factor"] is not None else None
    data["disabled"] = bool(data["disabled"])
    data["is_public"] = bool(data["is_public"])
    data["extra_specs"] = {str(k): str(v) for k, v in extra_specs.items()}
    data["description"] = None
    data["created_at"] = _iso(flavor.get("created_at"))
    data["updated_at"] = _iso(flavor.get("updated_at"))
    data["deleted_at"] = None
    data["deleted"] = False
    return {
        "nova_object.name": "Flavor",
        "nova_object.namespace": "nova",
        "nova_object.version": "1.2",
        "nova_object.data": data,
    }


def dumps(cur: dict, old: dict | None = None, new: dict | None = None) -> str:
    """The column's text for the current flavor and, during a resize, the old and new ones."""
    return json.dumps({"cur": cur, "old": old, "new": new}, sort_keys=True, separators=(",", ":"))


class FlavorCopy:
    """The parsed column: ``cur``, ``old``, ``new`` as plain dicts of the Flavor's fields."""

    __slots__ = ("cur", "new", "old")

    def __init__(self, cur: dict, old: dict | None, new: dict | None):
        self.cur = cur
        self.old = old
        self.new = new

    @classmethod
    def loads(cls, text: str) -> FlavorCopy:
        info = json.loads(text)

        def data(entry):
            if not entry:
                return None
            fields = dict(entry["nova_object.data"])
            # Very old rows lack these two; Nova reads them as False and True.
            fields.setdefault("disabled", False)
            fields.setdefault("is_public", True)
            return fields

        return cls(data(info["cur"]), data(info.get("old")), data(info.get("new")))

    def sizes(self) -> dict:
        """The instance columns Nova keeps beside the copy (the current flavor's sizes)."""
        return {"memory_mb": self.cur["memory_mb"], "vcpus": self.cur["vcpus"], "root_gb": self.cur["root_gb"],
                "ephemeral_gb": self.cur["ephemeral_gb"], "instance_type_id": self.cur["id"]}
