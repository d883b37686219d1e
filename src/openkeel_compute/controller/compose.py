"""A server's KubeVirt objects from its row, with the image service as the cluster reaches it.

Every root disk import goes through here (a build, a rebuild, a resize's new disks, a VM pinned to
another node): the pure composition (``kubevirt.server.compose``) with Glance's URL and the service
token of ``controller/images.py``, and for a zero-disk flavor the image's size as the image service
reports it (Nova sizes such a root disk from the image).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sqlalchemy import Engine

from openkeel_compute.compute import flavor_copy, working_state
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.db.api import reader
from openkeel_compute.images.errors import ImageBadRequest, ImageNotAuthorized, ImageNotFound
from openkeel_compute.kubevirt.server import ServerObjects, ServerOptions, compose
from openkeel_compute.kubevirt.volumes import with_volumes
from openkeel_compute.model import sysmeta


class Composer:
    def __init__(self, options: ServerOptions, images: ImageAccess | None = None, engine: Engine | None = None
                 ) -> None:
        self.options = options
        self.images = images
        self.engine = engine  # where a server's network info is read when its row comes without it

    def __call__(self, server: dict[str, Any], flavor: dict[str, Any] | None = None,
                 **kwargs: Any) -> ServerObjects:
        """The server's objects from its row (on ``flavor``, a flavor copy entry, instead of its current
        one when given); ``kwargs`` go to ``kubevirt.server.compose`` (``root_volume``)."""
        image = image_from_system_metadata({k: v for k, v in server["system_metadata"].items()
                                            if k.startswith(sysmeta.IMAGE_PREFIX)})
        image["id"] = server["image_ref"]
        cur = flavor or flavor_copy.FlavorCopy.loads(server["flavor"]).cur
        if not int(cur.get("root_gb") or 0) and self.images is not None and image["id"]:
            # a zero-disk flavor's root disk is the image's size, which the server's record does not keep
            try:
                image.update(self.images.sizes(str(image["id"])))
            except (ImageNotFound, ImageNotAuthorized, ImageBadRequest):
                pass  # gone or hidden since the boot: the image's min_disk, if it has one, sizes the disk
        options, token = self.options, None
        if self.images is not None:
            options = dataclasses.replace(options, image_endpoint=self.images.endpoint())
            token = self.images.token()
        volumes = [b for b in server.get("block_devices") or () if b.get("destination_type") == "volume"
                   and b.get("volume_id") and b.get("connection_info")]
        if any(b.get("boot_index") == 0 for b in volumes):  # boot from volume: no image to size a disk from
            image.setdefault("min_disk", 1)
        made = compose(server, cur, image, server.get("key_data"), options, image_token=token,
                       ports=self.ports(server), **kwargs)
        if volumes:  # the server's Cinder volumes as disks on their claims (kubevirt/volumes.py)
            made = made._replace(vm=with_volumes(made.vm, volumes))
        return made

    def ports(self, server: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The server's Neutron ports (its network info), None when it has none: the VM's interfaces."""
        state = server.get("working_state")
        if state is None and self.engine is not None:
            with reader(self.engine) as conn:
                state = working_state.of(conn, str(server["uuid"]))
        text = (state or {}).get(sysmeta.NETWORK_INFO)
        if not text:
            return None
        ports: list[dict[str, Any]] = json.loads(text)
        return ports

    def token(self) -> str | None:
        """The service token the image import sends (None: no credential, or no image access)."""
        return self.images.token() if self.images is not None else None
