"""The volumes of a server on the cluster (issue 30): what a build does with the block devices the API
kept (block_device_mapping, with the Cinder attachment reserved for each existing volume).

Until the volumes are carried out on KubeVirt (a static PersistentVolume and claim per attachment),
a build with volumes ends at once in ERROR with Nova's "Build of instance <uuid> aborted: <reason>"
before anything is claimed or made.

A server's delete (``on_delete``, once its VM is gone) does what Nova's compute does with its volumes:
each Cinder attachment deleted (the volume back to ``available``), each volume marked
``delete_on_termination`` deleted, the mappings soft-deleted. Cinder's failures are logged and the
delete goes on, as Nova's does (the volume then stays attached in Cinder: an operator's
``cinder attachment-delete`` frees it).
"""

from __future__ import annotations

import logging
from typing import Any

from openkeel_compute.compute import block_device_rows
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.model import sysmeta

LOG = logging.getLogger(__name__)

NOT_YET = ("volumes cannot be attached on this cluster yet: boot from an image, without "
           "block_device_mapping volumes")


def build_refusal(server: dict[str, Any]) -> str | None:
    """Why the server cannot be built with its block devices, or None."""
    if (server.get("system_metadata") or {}).get(sysmeta.HAS_VOLUMES) == "True":
        return NOT_YET
    return None


def on_delete(ctx: Any, server_uuid: str, server: dict[str, Any]) -> None:
    """The server's volumes given back and deleted as Nova's compute does on delete."""
    if (server.get("system_metadata") or {}).get(sysmeta.HAS_VOLUMES) != "True":
        return
    with reader(ctx.engine) as conn:
        rows = block_device_rows.of(conn, server_uuid)
    if ctx.volumes is not None:
        from openkeel_compute.volume import errors as volume_errors

        calls = ctx.volumes.admin()
        for row in rows:
            try:
                if row["attachment_id"]:
                    calls.attachment_delete(row["attachment_id"])
                if row["volume_id"] and row["delete_on_termination"] and row["destination_type"] == "volume":
                    calls.delete_volume(row["volume_id"])
            except volume_errors.VolumeNotFound:
                pass  # deleted behind our back: nothing to give back
            except volume_errors.VolumeError as exc:
                LOG.warning("server %s: volume %s not given back to Cinder on delete: %s", server_uuid,
                            row["volume_id"], exc.message)
    elif rows:
        LOG.warning("server %s: its volumes are not given back: [cinder] is not configured", server_uuid)
    with transaction(ctx.engine) as conn:
        block_device_rows.delete_all(conn, server_uuid)
