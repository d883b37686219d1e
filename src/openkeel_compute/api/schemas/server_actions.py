"""Body schemas of the server actions (POST /servers/{server_id}/action), Nova 34.0.0's."""


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
