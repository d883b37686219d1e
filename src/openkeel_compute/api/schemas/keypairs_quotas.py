"""Request and query schemas of os-keypairs, os-quota-sets, os-quota-class-sets, limits and
os-availability-zone (Nova 34.0.0's)."""

import copy
from typing import Any


def _multi(item: dict) -> dict:
    return {"type": "array", "items": item}


_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}


def _keypair_name(pattern: str) -> dict:
    return {"allOf": [_NAME, {"type": "string", "pattern": pattern, "minLength": 1, "maxLength": 255}]}


KEYPAIR_NAME = _keypair_name(r"^[_\- a-zA-Z0-9]+$")
KEYPAIR_NAME_V292 = _keypair_name(r"^[_\-\@\. a-zA-Z0-9]+$")
_NAME_V20 = {"type": "string", "format": "name_with_leading_trailing_spaces", "minLength": 1, "maxLength": 255}
_TYPE = {"type": "string", "enum": ["ssh", "x509"]}


def _keypair_body(properties: dict, required=("name",)) -> dict:
    return {
        "type": "object",
        "properties": {"keypair": {"type": "object", "properties": properties, "required": list(required),
                                   "additionalProperties": False}},
        "required": ["keypair"],
        "additionalProperties": False,
    }


keypair_create = _keypair_body({"name": KEYPAIR_NAME, "public_key": {"type": "string"}})
keypair_create_v20 = _keypair_body({"name": _NAME_V20, "public_key": {"type": "string"}})
keypair_create_v22 = _keypair_body({"name": KEYPAIR_NAME, "type": _TYPE, "public_key": {"type": "string"}})
keypair_create_v210 = _keypair_body({"name": KEYPAIR_NAME, "type": _TYPE, "public_key": {"type": "string"},
                                     "user_id": {"type": "string"}})
keypair_create_v292 = _keypair_body({"name": KEYPAIR_NAME_V292, "type": _TYPE, "public_key": {"type": "string"},
                                     "user_id": {"type": "string"}}, required=("name", "public_key"))
KEYPAIR_CREATE = {"2.0": keypair_create_v20, "2.1": keypair_create, "2.2-2.9": keypair_create_v22,
                  "2.10-2.91": keypair_create_v210, "2.92-": keypair_create_v292}

_LENIENT = {"type": "object", "properties": {}, "additionalProperties": True}
_user_query: dict[str, Any] = {"type": "object", "properties": {"user_id": _multi({"type": "string"})},
               "additionalProperties": True}
_user_query_strict = dict(_user_query, additionalProperties=False)
_NON_NEGATIVE = {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}
_index_v235 = copy.deepcopy(_user_query)
_index_v235["properties"].update(limit=_multi(_NON_NEGATIVE), marker=_multi({"type": "string"}))
_index_v275 = dict(copy.deepcopy(_index_v235), additionalProperties=False)
KEYPAIR_INDEX_QUERY = {"2.0-2.9": _LENIENT, "2.10-2.34": _user_query, "2.35-2.74": _index_v235,
                       "2.75-": _index_v275}
KEYPAIR_ONE_QUERY = {"2.0-2.9": _LENIENT, "2.10-2.74": _user_query, "2.75-": _user_query_strict}

# --- quotas ----------------------------------------------------------------------------------------

_QUOTA = {"type": ["integer", "string"], "pattern": "^-?[0-9]+$", "minimum": -1, "maximum": 0x7FFFFFFF}
_BOOLEAN = {
    "type": ["boolean", "string"],
    "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
             False, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no"],
}
_RESOURCES = ("instances", "cores", "ram", "floating_ips", "fixed_ips", "metadata_items", "key_pairs",
              "security_groups", "security_group_rules", "injected_files", "injected_file_content_bytes",
              "injected_file_path_bytes", "server_groups", "server_group_members")
_NETWORK = ("fixed_ips", "floating_ips", "security_groups", "security_group_rules")
_FILES = ("injected_files", "injected_file_content_bytes", "injected_file_path_bytes")


def _quota_body(wrapper: str, *, drop=(), force=False) -> dict:
    properties = {r: _QUOTA for r in _RESOURCES if r not in drop}
    if force:
        properties["force"] = _BOOLEAN
    return {"type": "object",
            "properties": {wrapper: {"type": "object", "properties": properties, "additionalProperties": False}},
            "required": [wrapper], "additionalProperties": False}


QUOTA_SET_UPDATE = {"2.0-2.35": _quota_body("quota_set", force=True),
                    "2.36-2.56": _quota_body("quota_set", drop=_NETWORK, force=True),
                    "2.57-": _quota_body("quota_set", drop=_NETWORK + _FILES, force=True)}
QUOTA_SET_QUERY = {"2.0-2.74": _user_query, "2.75-": _user_query_strict}
QUOTA_DEFAULTS_QUERY = {"2.0-": _LENIENT}
QUOTA_CLASS_UPDATE = {"2.0-2.49": _quota_body("quota_class_set"),
                      "2.50-2.56": _quota_body("quota_class_set", drop=_NETWORK),
                      "2.57-": _quota_body("quota_class_set", drop=_NETWORK + _FILES)}
_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}
QUOTA_CLASS_QUERY = {"2.0-2.101": _LENIENT, "2.102-": _STRICT}

_limits_query = {"type": "object", "properties": {"tenant_id": _multi({"type": "string"})},
                 "additionalProperties": True}
LIMITS_QUERY = {"2.0-2.74": _limits_query, "2.75-": dict(_limits_query, additionalProperties=False)}
AZ_QUERY = {"2.0-2.101": _LENIENT, "2.102-": _STRICT}
