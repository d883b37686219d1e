"""/os-assisted-volume-snapshots: the calls Cinder's file-based drivers (NFS and the like) make so that
the hypervisor takes or merges a qcow2 snapshot of a volume in use, answered as Nova 34.0.0 answers
them (service role or admin; Nova's body and query checks and messages).

The volume's block device is looked up among every server's (Nova's ``get_by_volume``): none is 400
"No volume Block Device Mapping with id …", two is the multiattach refusal; the server must have a
host ("Instance … is not ready"), no task and have been launched (Nova's ``check_instance_state``
messages, with the names of Nova's inner functions as Nova shows them); a delete with a
``merge_target_file`` needs an ACTIVE server. A create then answers ``{"snapshot": {"id": create_info
id, "volumeId": …}}`` and a delete 204, as Nova's API does once it has handed the work to the compute
host.

What Nova's libvirt driver then does in the guest (a qcow2 overlay created by ``blockdev-snapshot``, or
merged by ``block-commit``/``block-rebase``) has no KubeVirt API: a VM's disks are its volumes'
files and KubeVirt offers no external snapshot of one. OpenKeel is then what Nova is with a driver that
cannot (the base ComputeDriver raises NotImplementedError on the compute host, after the API has
answered): nothing is done on the cluster, and Cinder, which waits for the snapshot's progress, marks
it ``error`` when its wait ends (docs/volumes.md). The Cinder driver's snapshots should instead be
taken with the volume detached, or a backend whose snapshots are Cinder's own (iSCSI, RBD).
"""

from __future__ import annotations

import json
import logging

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import block_device_rows
from openkeel_compute.compute import errors as compute_errors
from openkeel_compute.compute.instances import store
from openkeel_compute.policies import volumes as rules

LOG = logging.getLogger(__name__)

_NON_EMPTY = {"type": "string", "minLength": 1}
CREATE_BODY = {"2.0-": {
    "type": "object",
    "properties": {"snapshot": {
        "type": "object",
        "properties": {
            "volume_id": _NON_EMPTY,
            "create_info": {
                "type": "object",
                "properties": {"snapshot_id": _NON_EMPTY, "type": {"type": "string", "enum": ["qcow2"]},
                               "new_file": _NON_EMPTY, "id": _NON_EMPTY},
                "required": ["snapshot_id", "type", "new_file"],
                "additionalProperties": False,
            },
        },
        "required": ["volume_id", "create_info"],
        "additionalProperties": False,
    }},
    "required": ["snapshot"],
    "additionalProperties": False,
}}
_DELETE_INFO = {"delete_info": {"type": "array", "items": {"type": "string"}}}
DELETE_QUERY = {"2.0-2.74": {"type": "object", "properties": _DELETE_INFO, "additionalProperties": True},
                "2.75-": {"type": "object", "properties": _DELETE_INFO, "additionalProperties": False}}


def _invalid_state(row: dict, attr: str, state, method: str) -> faults.Fault:
    return faults.BadRequest(f"Instance {row['uuid']} in {attr} {state}. Cannot {method} while the instance is "
                             "in this state.")


def _server_of(req, volume_id: str, method: str) -> dict:
    """The server the volume is attached to, checked as Nova's check_instance_host and
    check_instance_state(vm_state=None) check it."""
    if not isinstance(volume_id, str) or "\x00" in volume_id:  # no mapping names it (Nova: a database error)
        raise faults.BadRequest(f"No volume Block Device Mapping with id {volume_id}.")
    with common.read(req) as conn:
        bdms = block_device_rows.by_volume(conn, volume_id)
        if len(bdms) > 1:
            raise faults.BadRequest(f"Block Device Mapping {volume_id} is a multi-attach volume and is not valid "
                                    "for this operation.")
        try:
            row = store.get(conn, bdms[0]["instance_uuid"]) if bdms else None
        except compute_errors.InstanceNotFound:
            row = None
    if row is None:
        raise faults.BadRequest(f"No volume Block Device Mapping with id {volume_id}.")
    if not row.get("host"):
        raise faults.BadRequest(f"Instance {row['uuid']} is not ready")
    if row.get("task_state") is not None:
        raise _invalid_state(row, "task_state", row["task_state"], method)
    if not row.get("launched_at"):
        raise _invalid_state(row, "launched_at", None, method)
    return row


@operation(body=CREATE_BODY, expected=(400,))
def create(req):
    common.can(req, rules.ASSISTED_SNAPSHOTS % "create", {})
    snapshot = req.body["snapshot"]
    volume_id, create_info = snapshot["volume_id"], snapshot["create_info"]
    row = _server_of(req, volume_id, "do_volume_snapshot_create")
    LOG.warning("Cinder asked for an assisted snapshot %s of volume %s on server %s: KubeVirt cannot take a "
                "guest-assisted qcow2 snapshot, nothing is done (as Nova with a driver that cannot)",
                create_info.get("snapshot_id"), volume_id, row["uuid"])
    return {"snapshot": {"id": create_info.get("id"), "volumeId": volume_id}}


@operation(query=DELETE_QUERY, success=204, expected=(400, 404))
@wsgi_path_params
def delete(req, snapshot_id):
    common.can(req, rules.ASSISTED_SNAPSHOTS % "delete", {})
    try:
        delete_info = json.loads(req.query["delete_info"][-1])
        volume_id = delete_info["volume_id"]
    except (KeyError, ValueError) as exc:
        raise faults.BadRequest(str(exc)) from None
    except TypeError as exc:  # JSON that is not an object: Nova's 500 (a TypeError it does not catch)
        raise faults.BadRequest(str(exc)) from None
    row = _server_of(req, volume_id, "do_volume_snapshot_delete")
    if delete_info.get("merge_target_file") is not None and row.get("vm_state") != "active":
        raise _invalid_state(row, "vm_state", row.get("vm_state"), "volume_snapshot_delete")
    LOG.warning("Cinder asked to delete the assisted snapshot %s of volume %s on server %s: KubeVirt cannot merge "
                "a guest's qcow2 snapshot, nothing is done (as Nova with a driver that cannot)", snapshot_id,
                volume_id, row["uuid"])
