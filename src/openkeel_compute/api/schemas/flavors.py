"""Request and query schemas of /flavors (Nova 34.0.0's, which clients are validated against)."""

import copy

from openkeel_compute.api import validation

MAX_INT = 2147483647
SQL_SP_FLOAT_MAX = 3.40282e38

BOOLEAN = {
    "type": ["boolean", "string"],
    "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
             False, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no"],
}


def _non_negative_integer(minimum: int) -> dict:
    return {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": minimum, "maximum": MAX_INT}


FLAVOR_ID = {
    "type": ["string", "number", "null"],
    "minLength": 1,
    "maxLength": 255,
    "pattern": "^(?! )[a-zA-Z0-9. _-]+(?<! )$",
}

DESCRIPTION = {
    "type": ["string", "null"],
    "minLength": 0,
    "maxLength": 65535,
    "pattern": validation.description_regex(),
}

_flavor_properties = {
    "name": {"type": "string", "format": "name", "minLength": 1, "maxLength": 255},
    "id": FLAVOR_ID,
    "ram": _non_negative_integer(1),
    "vcpus": _non_negative_integer(1),
    "disk": _non_negative_integer(0),
    "OS-FLV-EXT-DATA:ephemeral": _non_negative_integer(0),
    "swap": _non_negative_integer(0),
    "rxtx_factor": {
        "type": ["number", "string"],
        "pattern": r"^[0-9]+(\.[0-9]+)?$",
        "exclusiveMinimum": 0,
        "maximum": SQL_SP_FLOAT_MAX,
    },
    "os-flavor-access:is_public": BOOLEAN,
}


def _create(properties: dict) -> dict:
    return {
        "type": "object",
        "properties": {
            "flavor": {
                "type": "object",
                "properties": properties,
                "required": ["name", "ram", "vcpus", "disk"],
                "additionalProperties": False,
            }
        },
        "required": ["flavor"],
        "additionalProperties": False,
    }


create = _create(_flavor_properties)

create_v20 = copy.deepcopy(create)
create_v20["properties"]["flavor"]["properties"]["name"] = {
    "type": "string",
    "format": "name_with_leading_trailing_spaces",
    "minLength": 1,
    "maxLength": 255,
}

create_v255 = _create(dict(_flavor_properties, description=DESCRIPTION))

create_v2102 = _create({k: v for k, v in create_v255["properties"]["flavor"]["properties"].items()
                        if k != "rxtx_factor"})

update = {
    "type": "object",
    "properties": {
        "flavor": {
            "type": "object",
            "properties": {"description": DESCRIPTION},
            "required": ["description"],
            "additionalProperties": False,
        }
    },
    "required": ["flavor"],
    "additionalProperties": False,
}

VALID_SORT_KEYS = [
    "created_at", "description", "disabled", "ephemeral_gb", "flavorid", "id", "is_public", "memory_mb",
    "name", "root_gb", "rxtx_factor", "swap", "updated_at", "vcpu_weight", "vcpus",
]
VALID_SORT_DIR = ["asc", "desc"]


def _multi(item: dict) -> dict:
    return {"type": "array", "items": item}


_index_properties = {
    "limit": _multi({"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}),
    "marker": _multi({"type": "string"}),
    "is_public": _multi({"type": "string"}),
    "minRam": _multi({"type": "string"}),
    "minDisk": _multi({"type": "string"}),
    "sort_key": _multi({"type": "string", "enum": VALID_SORT_KEYS}),
    "sort_dir": _multi({"type": "string", "enum": VALID_SORT_DIR}),
}

index_query = {"type": "object", "properties": _index_properties, "additionalProperties": True}
index_query_v275 = {"type": "object", "properties": _index_properties, "additionalProperties": False}
index_query_v2102 = {
    "type": "object",
    "properties": dict(
        _index_properties,
        sort_key=_multi({"type": "string", "enum": [k for k in VALID_SORT_KEYS if k != "rxtx_factor"]}),
        name=_multi({"type": "string"}),
    ),
    "additionalProperties": False,
}

LENIENT_QUERY = {"type": "object", "properties": {}, "additionalProperties": True}
STRICT_QUERY = {"type": "object", "properties": {}, "additionalProperties": False}

show_query = LENIENT_QUERY
show_query_v2102 = STRICT_QUERY
