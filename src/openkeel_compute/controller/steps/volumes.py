"""The volumes of a server on the cluster (issue 30): what a build does with the block devices the API
kept (block_device_mapping, with the Cinder attachment reserved for each existing volume).

Until the volumes are carried out on KubeVirt (a static PersistentVolume and claim per attachment),
a build with volumes ends at once in ERROR with Nova's "Build of instance <uuid> aborted: <reason>"
before anything is claimed or made; its reservations are given back when the server is deleted.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.model import sysmeta

NOT_YET = ("volumes cannot be attached on this cluster yet: boot from an image, without "
           "block_device_mapping volumes")


def build_refusal(server: dict[str, Any]) -> str | None:
    """Why the server cannot be built with its block devices, or None."""
    if (server.get("system_metadata") or {}).get(sysmeta.HAS_VOLUMES) == "True":
        return NOT_YET
    return None
