"""/os-volumes_boot: Nova's older name of /servers, up to 2.102 (deprecated at 2.103, 404 after).

Nova's VolumesBootController is its servers controller under this path: the same schemas, bodies
(whose links name /servers) and errors. Nova 34.0.0 answers a valid body to its update (PUT) and to
its create and every action with a 500 of its own making (a KeyError: the handler passes the body
on positionally where the decorated method reads it by name); OpenKeel answers what /servers answers
to the same request (docs/api.md). Only the servers controller's own actions are routed here:
others are "There is no such action".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from openkeel_compute.api import microversion
from openkeel_compute.api.handlers import (
    server_actions,
    server_actions_unsupported,
    server_images,
    server_rebuild,
    server_resize,
    servers,
    servers_create,
    servers_list,
)

LAST = microversion.Version(2, 102)


def _capped(handler: Any) -> Callable:
    """``handler``'s contract, ending at 2.102."""
    op = handler.operation
    low, high = op.versions

    def volumes_boot(req, **params):
        return handler(req, **params)

    volumes_boot.__qualname__ = f"volumes_boot.{handler.__name__}"
    volumes_boot.operation = dataclasses.replace(  # type: ignore[attr-defined]
        op, func=volumes_boot, versions=(low, min(high, LAST)))
    return volumes_boot


index = _capped(servers_list.index)
detail = _capped(servers_list.detail)
create = _capped(servers_create.create)
show = _capped(servers.show)
update = _capped(servers.update)
delete = _capped(servers.delete)
ACTIONS = {
    "confirmResize": _capped(server_resize.confirm_resize),
    "revertResize": _capped(server_resize.revert_resize),
    "reboot": _capped(server_actions.reboot),
    "resize": _capped(server_resize.resize_server),
    "rebuild": _capped(server_rebuild.rebuild),
    "createImage": _capped(server_images.create_image),
    "os-start": _capped(server_actions.start),
    "os-stop": _capped(server_actions.stop),
    "trigger_crash_dump": _capped(server_actions_unsupported.trigger_crash_dump),
}
