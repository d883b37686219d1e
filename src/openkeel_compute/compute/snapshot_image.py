"""The image record Nova's API makes for a snapshot or a backup of a server (compute.utils.create_image).

The server's image as its system metadata keeps it (``image_*``: min_ram, min_disk and the formats at the
top, the rest as properties), named ``name``; the properties Nova never lets a snapshot inherit taken out
(the image signature, Cinder's encryption key, the ``os_glance`` namespace, ``[DEFAULT]
non_inheritable_image_properties``); then ``instance_uuid``, ``user_id`` and ``image_type``, the caller's
``metadata`` and, for a backup, ``backup_type``. The image is ``private``, or ``shared`` (with
``instance_owner``) when the caller is not in the server's project. A snapshot leaves the formats out: the
upload gives them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.model import sysmeta

NEVER_INHERITED = frozenset({
    "cinder_encryption_key_id", "cinder_encryption_key_deletion_policy", "img_signature",
    "img_signature_hash_method", "img_signature_key_type", "img_signature_certificate_uuid"})
NEVER_INHERITED_NAMESPACES = ("os_glance",)


def snapshot_image(server: Mapping[str, Any], system_metadata: Mapping[str, str], *, name: str, image_type: str | None,
                   caller_project: str | None, caller_user: str | None, extra: Mapping[str, Any] | None,
                   non_inheritable: Iterable[str] = ()) -> dict[str, Any]:
    """The Glance v2 fields of the new image (base fields at the top, custom properties beside them).
    ``image_type`` None: a volume-backed server's snapshot, which Nova gives no ``instance_uuid``,
    ``user_id`` nor ``image_type`` (compute/volume_snapshot.py)."""
    image = image_from_system_metadata({k: v for k, v in system_metadata.items()
                                        if k.startswith(sysmeta.IMAGE_PREFIX)})
    properties: dict[str, Any] = image.pop("properties")
    image["name"] = name
    own: dict[str, Any] = {} if image_type is None else {
        "instance_uuid": server["uuid"], "user_id": str(caller_user), "image_type": image_type}
    own.update(extra or {})
    if caller_project != server["project_id"]:
        image["visibility"] = "shared"
        own["instance_owner"] = server["project_id"]
    else:
        image["visibility"] = "private"
    dropped = set(non_inheritable) | NEVER_INHERITED
    dropped |= {key for key in properties if key.startswith(NEVER_INHERITED_NAMESPACES)}
    for key in dropped:
        properties.pop(key, None)
    properties.update(own)
    if image_type == "snapshot":
        image.pop("disk_format", None)
        image.pop("container_format", None)
    # Glance owns these: a property of the same name as a base field cannot be sent as a property
    sharing = properties.pop("instance_owner", None)
    body = {**image, **{k: v for k, v in properties.items() if k not in ("id", "status", "owner", "size")}}
    for key in ("min_ram", "min_disk"):
        if key in body:
            body[key] = int(body[key])
    return {"body": body, "member": sharing}
