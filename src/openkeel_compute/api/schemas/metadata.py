"""The metadata bodies of servers and images (POST, PUT of all items, PUT of one item)."""

from __future__ import annotations

import copy

METADATA = {
    "type": "object",
    "patternProperties": {"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
    "additionalProperties": False,
}
_ONE = copy.deepcopy(METADATA)
_ONE.update({"minProperties": 1, "maxProperties": 1})
CREATE = {"type": "object", "properties": {"metadata": METADATA}, "required": ["metadata"],
          "additionalProperties": False}
UPDATE_ALL = CREATE
UPDATE = {"type": "object", "properties": {"meta": _ONE}, "required": ["meta"], "additionalProperties": False}
