"""Request schemas of /flavors/{id}/os-extra_specs."""

KEY_PATTERN = "^[a-zA-Z0-9-_:. ]{1,255}$"
_VALUE = {"type": ["string", "number"], "maxLength": 255}

create = {
    "type": "object",
    "properties": {
        "extra_specs": {
            "type": "object",
            "patternProperties": {KEY_PATTERN: _VALUE},
            "additionalProperties": False,
        }
    },
    "required": ["extra_specs"],
    "additionalProperties": False,
}

update = {
    "type": "object",
    "patternProperties": {KEY_PATTERN: _VALUE},
    "additionalProperties": False,
    "minProperties": 1,
    "maxProperties": 1,
}
