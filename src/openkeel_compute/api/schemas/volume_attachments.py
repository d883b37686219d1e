"""Body schemas of POST and PUT /servers/{server_id}/os-volume_attachments[/{volume_id}], Nova 34.0.0's."""

from typing import Any

_UUID = {"type": "string", "format": "uuid"}
# the pattern of Nova's block_device.match_device
_DEVICE = {"type": ["string", "null"], "pattern": "(^/dev/x{0,1}[a-z]{0,1}d{0,1})([a-z]+)[0-9]*$"}
_TAG = {"type": "string", "pattern": "^[^,/]*$", "minLength": 1, "maxLength": 60}
_BOOLEAN = {"type": ["boolean", "string"], "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes",
                                                   "yes", False, "False", "FALSE", "false", "0", "OFF", "Off", "off",
                                                   "NO", "No", "no"]}


def _body(**properties: Any) -> dict:
    return {"type": "object",
            "properties": {"volumeAttachment": {"type": "object", "properties": properties, "required": ["volumeId"],
                                                "additionalProperties": False}},
            "required": ["volumeAttachment"], "additionalProperties": False}


create = _body(volumeId=_UUID, device=_DEVICE)
create_v249 = _body(volumeId=_UUID, device=_DEVICE, tag=_TAG)
create_v279 = _body(volumeId=_UUID, device=_DEVICE, tag=_TAG, delete_on_termination=_BOOLEAN)
update = _body(volumeId=_UUID)
update_v285 = _body(volumeId=_UUID, device=_DEVICE, tag=_TAG, delete_on_termination=_BOOLEAN, serverId=_UUID,
                    id=_UUID)
