"""Body schemas of the server actions (POST /servers/{server_id}/action), Nova 34.0.0's."""

from typing import Any


def _any(name: str) -> dict:
    return {"type": "object", "properties": {name: {}}, "required": [name], "additionalProperties": False}


start = _any("os-start")
stop = _any("os-stop")
pause = _any("pause")
unpause = _any("unpause")
lock = _any("lock")
unlock = _any("unlock")
suspend = _any("suspend")
resume = _any("resume")

reboot = {
    "type": "object",
    "properties": {
        "reboot": {
            "type": "object",
            "properties": {"type": {"type": "string", "enum": ["HARD", "Hard", "hard", "SOFT", "Soft", "soft"]}},
            "required": ["type"],
            "additionalProperties": False,
        },
    },
    "required": ["reboot"],
    "additionalProperties": False,
}

lock_v273 = {
    "type": "object",
    "properties": {
        "lock": {
            "type": ["object", "null"],
            "properties": {"locked_reason": {"type": "string", "minLength": 1, "maxLength": 255}},
            "additionalProperties": False,
        },
    },
    "required": ["lock"],
    "additionalProperties": False,
}

get_console_output = {
    "type": "object",
    "properties": {
        "os-getConsoleOutput": {
            "type": "object",
            "properties": {"length": {"type": ["integer", "string", "null"], "pattern": "^-?[0-9]+$", "minimum": -1}},
            "additionalProperties": False,
        },
    },
    "required": ["os-getConsoleOutput"],
    "additionalProperties": False,
}


# --- the remaining actions ----------------------------------------------------------------------

def _object(name: str, properties: dict, *, required=(), nullable: bool = False) -> dict:
    inner = {"type": ["object", "null"] if nullable else "object", "properties": properties,
             "additionalProperties": False}
    if required:
        inner["required"] = list(required)
    return {"type": "object", "properties": {name: inner}, "required": [name], "additionalProperties": False}


def _null(name: str) -> dict:
    return {"type": "object", "properties": {name: {"type": "null"}}, "required": [name],
            "additionalProperties": False}


_NAME = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}
_NAME_V20 = {"type": "string", "format": "name_with_leading_trailing_spaces", "minLength": 1, "maxLength": 255}
_NAME_OR_NONE = {"oneOf": [{"type": "string", "minLength": 1, "maxLength": 255}, {"type": "null"}]}
_IMAGE_ID = {"type": "string", "format": "uuid"}
_PASSWORD = {"type": "string"}
_METADATA = {"type": "object", "patternProperties": {
    "^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}}, "additionalProperties": False}
_BOOLEAN: dict[str, Any]
_BOOLEAN = {"type": ["boolean", "string"], "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes",
                                                   "yes", "y", "t", False, "False", "FALSE", "false", "0", "OFF",
                                                   "Off", "off", "NO", "No", "no", "n", "f"]}
_DISK_CONFIG = {"type": "string", "enum": ["AUTO", "MANUAL"]}
_NON_NEGATIVE = {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}
_FQDN = {"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}
_HOST = dict(_FQDN, type=["string", "null"])
_HOSTNAME_V290 = {"type": "string", "pattern": "^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$", "minLength": 2,
                  "maxLength": 63}
_PERSONALITY = {"type": "array", "items": {"type": "object", "properties": {
    "path": {"type": "string"}, "contents": {"type": "string", "format": "base64"}},
    "additionalProperties": False}}
_TRUSTED_CERTS = {"type": ["array", "null"], "minItems": 1, "maxItems": 50, "uniqueItems": True,
                  "items": {"type": "string", "minLength": 1}}


def _description() -> dict:
    from openkeel_compute.api import validation

    return {"type": ["string", "null"], "pattern": validation.description_regex(), "minLength": 0, "maxLength": 255}


reset_state = _object("os-resetState", {"state": {"type": "string", "enum": ["active", "error"]}},
                      required=["state"])
inject_network_info = _any("injectNetworkInfo")
restore = _any("restore")
force_delete = _any("forceDelete")
change_password = _object("changePassword", {"adminPass": _PASSWORD}, required=["adminPass"])
trigger_crash_dump = _null("trigger_crash_dump")
confirm_resize = _any("confirmResize")
revert_resize = _any("revertResize")
resize = _object("resize", {"flavorRef": {"type": ["string", "integer"], "minLength": 1},
                            "OS-DCF:diskConfig": _DISK_CONFIG}, required=["flavorRef"])
create_image = _object("createImage", {"name": _NAME, "metadata": _METADATA}, required=["name"])
create_image_v20 = _object("createImage", {"name": _NAME_V20, "metadata": _METADATA}, required=["name"])
_backup = {"name": _NAME, "backup_type": {"type": "string"}, "rotation": _NON_NEGATIVE, "metadata": _METADATA}
create_backup = _object("createBackup", _backup, required=["name", "backup_type", "rotation"])
create_backup_v20 = _object("createBackup", dict(_backup, name=_NAME_V20), required=["name", "backup_type", "rotation"])
shelve = _any("shelve")
shelve_offload = _any("shelveOffload")
unshelve = _any("unshelve")
unshelve_v277 = _object("unshelve", {"availability_zone": _NAME}, required=["availability_zone"], nullable=True)
unshelve_v291 = _object("unshelve", {"availability_zone": {"type": ["string", "null"]}, "host": {"type": "string"}},
                        nullable=True)
rescue = _object("rescue", {"adminPass": _PASSWORD, "rescue_image_ref": _IMAGE_ID}, nullable=True)
unrescue = _any("unrescue")
migrate = _object("migrate", {"host": _HOST}, nullable=True)
migrate_live = _object("os-migrateLive", {"block_migration": _BOOLEAN, "disk_over_commit": _BOOLEAN, "host": _HOST},
                       required=["block_migration", "disk_over_commit", "host"])
_BLOCK_MIGRATION_V225 = dict(_BOOLEAN, enum=[*_BOOLEAN["enum"], "auto"])
migrate_live_v225 = _object("os-migrateLive", {"block_migration": _BLOCK_MIGRATION_V225, "host": _HOST},
                            required=["block_migration", "host"])
migrate_live_v230 = _object("os-migrateLive", {"block_migration": _BLOCK_MIGRATION_V225, "host": _HOST,
                                               "force": _BOOLEAN}, required=["block_migration", "host"])

# evacuate: onSharedStorage required before 2.14; force from 2.29 to 2.67 (Nova's evacuate schemas)
evacuate = _object("evacuate", {"host": _FQDN, "onSharedStorage": _BOOLEAN, "adminPass": _PASSWORD},
                   required=["onSharedStorage"])
evacuate_v214 = _object("evacuate", {"host": _FQDN, "adminPass": _PASSWORD})
evacuate_v229 = _object("evacuate", {"host": _FQDN, "adminPass": _PASSWORD, "force": _BOOLEAN})

_rebuild = {
    "name": _NAME, "imageRef": _IMAGE_ID, "adminPass": _PASSWORD, "metadata": _METADATA,
    "preserve_ephemeral": _BOOLEAN, "OS-DCF:diskConfig": _DISK_CONFIG,
    "accessIPv4": {"type": "string", "format": "ipv4"}, "accessIPv6": {"type": "string", "format": "ipv6"},
    "personality": _PERSONALITY,
}
_rebuild_v219 = dict(_rebuild, description=_description())
_rebuild_v254 = dict(_rebuild_v219, key_name=_NAME_OR_NONE)
_rebuild_v257 = {k: v for k, v in _rebuild_v254.items() if k != "personality"}
_rebuild_v257["user_data"] = {"type": ["string", "null"], "format": "base64", "maxLength": 65535}
_rebuild_v263 = dict(_rebuild_v257, trusted_image_certificates=_TRUSTED_CERTS)
_rebuild_v290 = dict(_rebuild_v263, hostname=_HOSTNAME_V290)
_rebuild_v294 = dict(_rebuild_v263, hostname=_FQDN)


def _rebuild_body(properties: dict) -> dict:
    return _object("rebuild", properties, required=["imageRef"])


REBUILD_BODY = {
    "2.0": _rebuild_body(dict(_rebuild, name=_NAME_V20)),
    "2.1-2.18": _rebuild_body(_rebuild),
    "2.19-2.53": _rebuild_body(_rebuild_v219),
    "2.54-2.56": _rebuild_body(_rebuild_v254),
    "2.57-2.62": _rebuild_body(_rebuild_v257),
    "2.63-2.89": _rebuild_body(_rebuild_v263),
    "2.90-2.93": _rebuild_body(_rebuild_v290),
    "2.94-": _rebuild_body(_rebuild_v294),
}
