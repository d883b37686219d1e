"""Body and query schemas of the remote consoles (the legacy os-get*Console actions up to 2.5,
POST /servers/{server_id}/remote-consoles from 2.6) and of os-console-auth-tokens, Nova 34.0.0's.

Nova's schemas still accept console types no driver offers any more (xvpvnc, rdp-html5): they are
refused further on, with Nova's messages."""


def _legacy(action: str, types: list[str]) -> dict:
    return {
        "type": "object",
        "properties": {
            action: {
                "type": "object",
                "properties": {"type": {"type": "string", "enum": types}},
                "required": ["type"],
                "additionalProperties": False,
            },
        },
        "required": [action],
        "additionalProperties": False,
    }


get_vnc_console = _legacy("os-getVNCConsole", ["novnc", "xvpvnc"])
get_spice_console = _legacy("os-getSPICEConsole", ["spice-html5"])
get_serial_console = _legacy("os-getSerialConsole", ["serial"])

def _create(protocols: list[str], types: list[str]) -> dict:
    return {
        "type": "object",
        "properties": {
            "remote_console": {
                "type": "object",
                "properties": {
                    "protocol": {"type": "string", "enum": protocols},
                    "type": {"type": "string", "enum": types},
                },
                "required": ["protocol", "type"],
                "additionalProperties": False,
            },
        },
        "required": ["remote_console"],
        "additionalProperties": False,
    }


_PROTOCOLS = ["vnc", "spice", "serial", "rdp"]
_TYPES = ["novnc", "xvpvnc", "spice-html5", "serial", "rdp-html5"]
create_v26 = _create(_PROTOCOLS, _TYPES)
create_v28 = _create([*_PROTOCOLS, "mks"], [*_TYPES, "webmks"])
create_v299 = _create([*_PROTOCOLS, "mks"], [*_TYPES, "webmks", "spice-direct"])
token_query = {"type": "object", "properties": {}, "additionalProperties": True}
token_query_v299 = {"type": "object", "properties": {}, "additionalProperties": False}
