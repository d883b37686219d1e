"""/extensions: the fixed list Nova 34.0.0 answers at every microversion (what clients such as
Neutron and Cinder read to find os-server-external-events and os-assisted-volume-snapshots).

The list is Nova's own (api/data/extensions.json, recorded from Nova); the legacy /v2 endpoint
adds the one extension only v2 had. An extension is shown by its alias.
"""

from __future__ import annotations

import functools
import json
import pathlib

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import Response, dumps, operation
from openkeel_compute.policies import contract as rules

_LENIENT = {"type": "object", "properties": {}, "additionalProperties": True}
_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}
QUERY = {"2.0-2.101": _LENIENT, "2.102-": _STRICT}


@functools.cache
def _lists() -> tuple[list[dict], list[dict]]:
    data = json.loads((pathlib.Path(__file__).parents[1] / "data" / "extensions.json").read_text())
    current = data["extensions"]
    legacy = sorted(current + data["legacy_v2_only"], key=lambda ext: ext["alias"])
    return current, legacy


@functools.cache
def _index_body(legacy: bool) -> bytes:
    return dumps({"extensions": _lists()[1 if legacy else 0]})


@operation(query=QUERY)
def index(req):
    common.can(req, rules.EXTENSIONS, {})
    return Response(_index_body(req.legacy_v2))


@operation(query=QUERY, expected=(404,))
@wsgi_path_params
def show(req, alias):
    common.can(req, rules.EXTENSIONS, {})
    for extension in _lists()[1 if req.legacy_v2 else 0]:
        if extension["alias"] == alias:
            return {"extension": extension}
    raise faults.NotFound("The resource could not be found.")
