"""Query schemas of /servers (Nova 34.0.0's): lenient before 2.75 (unknown parameters are
dropped), strict from 2.75 (an unknown parameter is a 400)."""

import copy
from typing import Any


def _multi(item: dict) -> dict:
    return {"type": "array", "items": item}


_PARAM = _multi({"type": "string"})
_REGEX = _multi({"type": "string", "format": "regex"})
_DATE_TIME = _multi({"type": "string", "format": "date-time"})

# Sort keys Nova accepts but ignores (with their sort_dir); refused from 2.75.
IGNORED_SORT_KEYS = [
    "architecture", "cell_name", "cleaned", "default_ephemeral_device", "default_swap_device", "deleted",
    "deleted_at", "disable_terminate", "ephemeral_gb", "ephemeral_key_uuid", "id", "key_data", "launched_on",
    "locked", "memory_mb", "os_type", "reservation_id", "root_gb", "shutdown_terminate", "user_data", "vcpus",
    "vm_mode",
]
IGNORED_SORT_KEYS_V273 = [k for k in IGNORED_SORT_KEYS if k != "locked"]
SORT_KEYS = [
    "access_ip_v4", "access_ip_v6", "auto_disk_config", "availability_zone", "config_drive", "created_at",
    "display_description", "display_name", "host", "hostname", "image_ref", "instance_type_id", "kernel_id",
    "key_name", "launch_index", "launched_at", "locked_by", "node", "power_state", "progress", "project_id",
    "ramdisk_id", "root_device_name", "task_state", "terminated_at", "updated_at", "user_id", "uuid", "vm_state",
]
# Parameters naming joined tables: accepted by the schema, refused by the handler.
JOINED_TABLE_PARAMS = ["block_device_mapping", "services", "metadata", "system_metadata", "info_cache",
                       "security_groups", "pci_devices"]

_properties = {name: _PARAM for name in (
    "user_id", "project_id", "tenant_id", "launch_index", "image_ref", "image", "vm_state", "task_state", "host",
    "uuid", "sort_dir", "all_tenants", "soft_deleted", "deleted", "status", "marker", *JOINED_TABLE_PARAMS)}
_properties.update({name: _REGEX for name in (
    "kernel_id", "ramdisk_id", "hostname", "key_name", "power_state", "node", "flavor", "reservation_id",
    "launched_at", "terminated_at", "availability_zone", "name", "display_name", "description",
    "display_description", "locked_by", "root_device_name", "config_drive", "access_ip_v4", "access_ip_v6",
    "auto_disk_config", "progress", "ip", "ip6", "created_at")})
_properties["sort_key"] = _multi({"type": "string", "enum": SORT_KEYS + IGNORED_SORT_KEYS})
_properties["changes-since"] = _DATE_TIME
_properties["limit"] = _multi({"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1})

index_query: dict[str, Any] = {
    "type": "object",
    "properties": _properties,
    "additionalProperties": True,
    # kept so that the handler can refuse them
    "patternProperties": {"^_": _PARAM},
}

index_query_v226 = copy.deepcopy(index_query)
index_query_v226["properties"].update({name: _REGEX for name in ("tags", "tags-any", "not-tags", "not-tags-any")})

index_query_v266 = copy.deepcopy(index_query_v226)
index_query_v266["properties"]["changes-before"] = _DATE_TIME

index_query_v273 = copy.deepcopy(index_query_v266)
index_query_v273["properties"]["sort_key"] = _multi(
    {"type": "string", "enum": ["locked", *SORT_KEYS, *IGNORED_SORT_KEYS_V273]})
index_query_v273["properties"]["locked"] = _PARAM

index_query_v275 = copy.deepcopy(index_query_v273)
index_query_v275["properties"]["sort_key"] = _multi({"type": "string", "enum": ["locked", *SORT_KEYS]})
index_query_v275["additionalProperties"] = False

INDEX_QUERY = {"2.0-2.25": index_query, "2.26-2.65": index_query_v226, "2.66-2.72": index_query_v266,
               "2.73-2.74": index_query_v273, "2.75-": index_query_v275}

show_query = {"type": "object", "properties": {}, "additionalProperties": True}
show_query_v2102 = {"type": "object", "properties": {}, "additionalProperties": False}
SHOW_QUERY = {"2.0-2.101": show_query, "2.102-": show_query_v2102}


# --- PUT /servers/{server_id} ------------------------------------------------------------------

_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}
_NAME_V20 = {"type": "string", "format": "name_with_leading_trailing_spaces", "minLength": 1, "maxLength": 255}


def _description() -> dict:
    from openkeel_compute.api import validation

    return {"type": ["string", "null"], "pattern": validation.description_regex(), "minLength": 0, "maxLength": 255}


def _update(properties: dict) -> dict:
    return {
        "type": "object",
        "properties": {"server": {"type": "object", "properties": properties, "additionalProperties": False}},
        "required": ["server"],
        "additionalProperties": False,
    }


_update_properties = {
    "name": _NAME,
    "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
    "accessIPv4": {"type": "string", "format": "ipv4"},
    "accessIPv6": {"type": "string", "format": "ipv6"},
}
update = _update(_update_properties)
update_v20 = _update(dict(_update_properties, name=_NAME_V20))
update_v219 = _update(dict(_update_properties, description=_description()))
update_v290 = _update(dict(_update_properties, description=_description(), hostname={
    "type": "string", "pattern": "^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$", "minLength": 2, "maxLength": 63}))
update_v294 = _update(dict(_update_properties, description=_description(), hostname={
    "type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}))
update_v2104 = _update(dict(_update_properties, description=_description(), hostname={
    "type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255},
    pinned_availability_zone={"oneOf": [{"type": "string", "minLength": 1, "maxLength": 255}, {"type": "null"}]}))
UPDATE_BODY = {"2.0": update_v20, "2.1-2.18": update, "2.19-2.89": update_v219, "2.90-2.93": update_v290,
               "2.94-2.103": update_v294, "2.104-": update_v2104}


# --- POST /servers ---------------------------------------------------------------------------------

_IMAGE_REF = {"oneOf": [{"type": "string", "format": "uuid"}, {"type": "string", "maxLength": 0}]}
_FLAVOR_REF = {"type": ["string", "integer"], "minLength": 1}
_UUID = {"type": "string", "format": "uuid"}
_POSITIVE = {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 1, "minLength": 1}
_METADATA = {"type": "object", "patternProperties": {
    "^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}}, "additionalProperties": False}
_BOOLEAN = {"type": ["boolean", "string"], "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes",
                                                   "yes", False, "False", "FALSE", "false", "0", "OFF", "Off", "off",
                                                   "NO", "No", "no"]}
_TAG = {"type": "string", "pattern": "^[^,/]*$", "minLength": 1, "maxLength": 60}
_NETWORK: dict[str, Any] = {"type": "object", "properties": {
    "fixed_ip": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
    "port": {"type": ["string", "null"], "format": "uuid"},
    "uuid": {"type": "string"}}, "additionalProperties": False}
_NETWORKS = {"type": "array", "items": _NETWORK}
# a device tag on each requested network from 2.32 (not in 2.37-2.41); a uuid's form is checked from 2.37
_NETWORK_TAGGED = {**_NETWORK, "properties": {**_NETWORK["properties"], "tag": _TAG}}
_NETWORKS_V232 = {"type": "array", "items": _NETWORK_TAGGED}
_NETWORK_V237 = {**_NETWORK, "properties": {**_NETWORK["properties"], "uuid": _UUID}}
_NETWORKS_V237 = {"oneOf": [{"type": "array", "items": _NETWORK_V237},
                            {"type": "string", "enum": ["none", "auto"]}]}
_NETWORK_V242 = {**_NETWORK_V237, "properties": {**_NETWORK_V237["properties"], "tag": _TAG}}
_NETWORKS_V242 = {"oneOf": [{"type": "array", "items": _NETWORK_V242},
                            {"type": "string", "enum": ["none", "auto"]}]}
# The legacy block_device_mapping and block_device_mapping_v2 (whose items take the legacy fields
# too), as Nova's schemas: a device tag at 2.32 only and from 2.42, a volume type from 2.67.
_LEGACY_BDM_ITEM: dict[str, Any] = {"type": "object", "properties": {
    "virtual_name": {"type": "string", "maxLength": 255},
    "volume_id": _UUID, "snapshot_id": _UUID,
    "volume_size": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1, "maximum": 2147483647},
    "device_name": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[a-zA-Z0-9._/-]*$"},
    "delete_on_termination": _BOOLEAN, "no_device": {},
    "connection_info": {"type": "string", "maxLength": 16777215}},
    "additionalProperties": False}
_BDM_ITEM: dict[str, Any] = {**_LEGACY_BDM_ITEM, "properties": {
    **_LEGACY_BDM_ITEM["properties"],
    "source_type": {"type": "string", "enum": ["volume", "image", "snapshot", "blank"]},
    "uuid": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[a-zA-Z0-9._-]*$"},
    "image_id": _UUID,
    "destination_type": {"type": "string", "enum": ["local", "volume"]},
    "guest_format": {"type": "string", "maxLength": 255},
    "device_type": {"type": "string", "maxLength": 255}, "disk_bus": {"type": "string", "maxLength": 255},
    "boot_index": {"type": ["integer", "string", "null"], "pattern": "^-?[0-9]+$"}}}
_BDM_ITEM_TAGGED: dict[str, Any] = {**_BDM_ITEM, "properties": {**_BDM_ITEM["properties"], "tag": _TAG}}
_BDM_ITEM_V267: dict[str, Any] = {**_BDM_ITEM_TAGGED, "properties": {
    **_BDM_ITEM_TAGGED["properties"], "volume_type": {"type": ["string", "null"], "minLength": 0, "maxLength": 255}}}
_LEGACY_BDM = {"type": "array", "items": _LEGACY_BDM_ITEM}
_BDM = {"type": "array", "items": _BDM_ITEM}
_BDM_TAGGED = {"type": "array", "items": _BDM_ITEM_TAGGED}
_BDM_V267 = {"type": "array", "items": _BDM_ITEM_V267}
_PERSONALITY = {"type": "array", "items": {"type": "object", "properties": {
    "path": {"type": "string"}, "contents": {"type": "string", "format": "base64"}},
    "additionalProperties": False}}
_create_properties = {
    "name": _NAME, "imageRef": _IMAGE_REF, "flavorRef": _FLAVOR_REF, "adminPass": {"type": "string"},
    "metadata": _METADATA, "networks": _NETWORKS, "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
    "accessIPv4": {"type": "string", "format": "ipv4"}, "accessIPv6": {"type": "string", "format": "ipv6"},
    "personality": _PERSONALITY, "availability_zone": {"type": "string", "format": "name", "minLength": 1,
                                                       "maxLength": 255},
    "block_device_mapping": _LEGACY_BDM, "block_device_mapping_v2": _BDM, "config_drive": _BOOLEAN,
    "key_name": {"type": "string", "format": "name", "minLength": 1, "maxLength": 255},
    "min_count": _POSITIVE, "max_count": _POSITIVE, "return_reservation_id": _BOOLEAN,
    "security_groups": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}},
        "additionalProperties": False}},
    "user_data": {"type": "string", "format": "base64", "maxLength": 65535},
}


# Scheduler hints: the known ones are checked, any other is accepted and kept.
_SERVER_UUIDS = {"type": "array", "items": _UUID}
SCHEDULER_HINTS = {"type": "object", "properties": {
    "group": {"oneOf": [_SERVER_UUIDS, _UUID]},
    "different_host": {"oneOf": [_UUID, _SERVER_UUIDS]},
    "same_host": {"type": ["string", "array"], "items": _UUID},
    "query": {"type": ["string", "object"]},
    "target_cell": _NAME,
    "different_cell": {"type": ["string", "array"], "items": {"type": "string"}},
    "build_near_host_ip": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
    "cidr": {"type": "string", "pattern": "^/[0-9a-f.:]+$"}}, "additionalProperties": True}


def _create(properties: dict, *, networks_required: bool = False) -> dict:
    required = ["name", "flavorRef"] + (["networks"] if networks_required else [])
    return {
        "type": "object",
        "properties": {
            "server": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False},
            "os:scheduler_hints": SCHEDULER_HINTS,
            "OS-SCH-HNT:scheduler_hints": SCHEDULER_HINTS,
        },
        "required": ["server"],
        "additionalProperties": False,
    }


def _with(base: dict, **changes) -> dict:
    out = dict(base)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


_c21 = _create_properties
_c219 = _with(_c21, description=_description())
_c232 = _with(_c219, networks=_NETWORKS_V232, block_device_mapping_v2=_BDM_TAGGED)
_c233 = _with(_c219, networks=_NETWORKS_V232)  # the device tag of 2.32 only (Nova's create_v233)
_c237 = _with(_c219, networks=_NETWORKS_V237)
_c242 = _with(_c219, networks=_NETWORKS_V242, block_device_mapping_v2=_BDM_TAGGED)
_c252 = _with(_c242, tags={"type": "array", "items": _TAG, "maxItems": 50})
_c257 = _with(_c252, personality=None, user_data={"type": "string", "format": "base64", "maxLength": 65535})
# 2.74: a requested destination, as Nova's fqdn parameter type (underscores allowed)
_FQDN = {"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}
_c267 = _with(_c257, block_device_mapping_v2=_BDM_V267)
_c274 = _with(_c267, host=_FQDN, hypervisor_hostname=_FQDN)
_c290 = _with(_c274, hostname={"type": "string", "pattern": "^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$",
                                "minLength": 2, "maxLength": 63})
_c294 = _with(_c290, hostname={"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255})

CREATE_BODY = {
    "2.0": _create(_with(_c21, name=_NAME_V20)),
    "2.1-2.18": _create(_c21),
    "2.19-2.31": _create(_c219),
    "2.32": _create(_c232),
    "2.33-2.36": _create(_c233),
    "2.37-2.41": _create(_c237, networks_required=True),
    "2.42-2.51": _create(_c242, networks_required=True),
    "2.52-2.56": _create(_c252, networks_required=True),
    "2.57-2.66": _create(_c257, networks_required=True),
    "2.67-2.73": _create(_c267, networks_required=True),
    "2.74-2.89": _create(_c274, networks_required=True),
    "2.90-2.93": _create(_c290, networks_required=True),
    "2.94-": _create(_c294, networks_required=True),
}
