"""The system-metadata keys of a server that more than one room reads or writes.

Nova's own keys (what it shows or acts on) keep Nova's names; the controller's bookkeeping keys start
with ``openkeel_`` and are never shown by the API. A value of system metadata is a string (Nova's
column), at most 255 characters on every engine: the controller's keys kept there have values bounded by
construction (event ids, a VMI's uid); those whose values can be longer are ``WORKING_STATE`` and live in
a table of their own (compute/working_state.py).
"""

from __future__ import annotations

# -- what the API writes at boot and the controller reads -----------------------------------------------

#: the image's properties, copied at boot as ``image_<property>`` (compute/image_meta.py)
IMAGE_PREFIX = "image_"
#: the image a rebuild replaced the server's with, as Nova records it
BASE_IMAGE_REF = "image_base_image_ref"
#: the image's name at boot or rebuild (at most 255 characters), which Nova's legacy notifications of a
#: build or rebuild carry (``image_name``); not an image property, so not shown by 2.98
IMAGE_NAME = "openkeel_image_name"
#: the server's security group names (JSON list; "null": the server has no network)
SECURITY_GROUPS = "security_groups"
#: "none" when the server was created with networks "none": the controller gives its VM no interface
REQUESTED_NETWORKS = "requested_networks"
#: the node asked for at boot: the legacy forced host ("zone:host[:node]") or 2.74's host and
#: hypervisor_hostname. A Kubernetes node is both Nova's host and its node.
REQUESTED_HOST = "requested_host"
REQUESTED_NODE = "requested_hypervisor_hostname"
#: "True" for the legacy forced form, which bypasses the scheduler's checks in Nova
FORCED_DESTINATION = "forced_destination"
#: "True" when the server's root disk is a volume (boot from volume): no local root disk, no DISK_GB
#: claimed for the flavor's root_gb (Nova's is_bfv); the block devices are in block_device_mapping
BOOT_FROM_VOLUME = "openkeel_boot_from_volume"
#: "True" when the server was booted with volumes (block_device_mapping rows with destination volume):
#: the controller reads those rows only then
HAS_VOLUMES = "openkeel_has_volumes"
#: "True" when the server has block_device_mapping rows at all: its delete soft-deletes them
HAS_BLOCK_DEVICES = "openkeel_block_devices"
#: the rescue_image_ref of the server's last rescue ("" when none was given) and the name of the image it
#: booted (Nova's rescue notifications carry both: InstanceActionRescuePayload.rescue_image_ref, the legacy
#: payload's rescue_image_name)
RESCUE_IMAGE_REF = "openkeel_rescue_image_ref"
RESCUE_IMAGE_NAME = "openkeel_rescue_image_name"
#: the vm_state a resize started from (Nova's old_vm_state): a revert goes back to it
OLD_VM_STATE = "old_vm_state"

# -- the controller's bookkeeping: what a restarted controller needs to carry on -------------------------

#: the instance-action event of the running *task* of one outbox row, "<outbox row id>:<event id>". It is
#: started before the cluster is asked and finished by the observation that sees the task end (or as
#: "Error" by a delete that overrides the task).
TASK_EVENT = "openkeel_task_event"
#: the event of the running *resize step*, "<event id>": started and finished by the resize steps
#: themselves, across the rows of one resize (resize, then confirm or revert), never by the observation.
#: It must differ from TASK_EVENT: the observation ends the task event when it sees no task, which a
#: resize passes through between its steps, and the two values have different shapes.
RESIZE_STEP_EVENT = "openkeel_resize_event"
#: the VMI a hard reboot replaces: the reboot is done only once another VMI runs
REPLACED_VMI = "openkeel_replaced_vmi"
#: a build waiting for Neutron's network-vif-plugged of its ports: when it gives up (ISO 8601 time,
#: [DEFAULT] vif_plugging_timeout after the VM was started). The server stays BUILD meanwhile.
VIF_WAIT = "openkeel_vif_wait"
#: a detach waiting for KubeVirt to take the interface out of the running guest: until when (ISO 8601 time)
DETACH_WAIT = "openkeel_detach_wait"
#: the running attach or detach's instance-action event, "<outbox row id>:<event id>": not TASK_EVENT, which the
#: observation ends when it sees no task (an attach has none)
INTERFACE_EVENT = "openkeel_interface_event"

# -- the controller's working state of unbounded length: not system metadata -----------------------------
# Kept in table instance_controller_state (compute/working_state.py), whose values are text of any length:
# in system metadata they would overflow its 255 characters on PostgreSQL and MariaDB.

#: the nodes a build was tried on, comma-separated (Placement's alternates, [scheduler] max_attempts);
#: a node name takes up to 253 characters
TRIED_NODES = "openkeel_tried_nodes"
#: the VM's matchers and ControllerRevisions before a resize (JSON, some 400 characters), what a revert
#: puts back
RESIZE_FROM = "openkeel_resize_from"
#: the nodes of a resize, JSON {"source": node, "dest": node} (the claim chose the destination)
RESIZE_NODES = "openkeel_resize_nodes"
#: the server's Neutron ports as the controller bound them (JSON list, Nova's network info cache): each
#: port's id, network (id, name), MAC, fixed IPs, floating IPs, whether OpenKeel created it, whether it
#: is plugged; the VM's interfaces and the server's addresses are made from it
NETWORK_INFO = "openkeel_network_info"
#: the volumes a build made and is waiting for (JSON {volume id: {"started": epoch seconds, "attempts":
#: reads}}), as Nova's _await_block_device_map_created counts them
VOLUME_WAITS = "openkeel_volume_waits"
#: the rebuild of a volume-backed server that Cinder re-images (JSON {"old": the root's attachment before,
#: "until": ISO time the wait for volume-reimaged ends, once os-reimage was asked}), as Nova's
#: _rebuild_volume_backed_instance waits
REIMAGE = "openkeel_reimage"
#: the keys of the controller's working state table
WORKING_STATE = frozenset({TRIED_NODES, RESIZE_FROM, RESIZE_NODES, NETWORK_INFO, VOLUME_WAITS, REIMAGE})


def requested_nodes(system_metadata: dict[str, str] | None) -> tuple[str, ...]:
    """The node names a server must run on (all of them: two different names leave it nowhere to run).

    The one function the controller's scheduling (node affinity, Placement candidates) reads the
    request through; empty when the server may run anywhere.
    """
    metadata = system_metadata or {}
    names = [metadata.get(REQUESTED_HOST), metadata.get(REQUESTED_NODE)]
    return tuple(sorted({name for name in names if name}))


def destination_forced(system_metadata: dict[str, str] | None) -> bool:
    """Whether the node was forced (legacy availability_zone form) rather than requested (2.74)."""
    return (system_metadata or {}).get(FORCED_DESTINATION) == "True"
