"""The outbox: what the API asks the controller to do, one row per request.

Each row has a kind (``FLAVOR`` or ``SERVER``), the object's id and an operation. The server
operations are the controller's step table (controller/steps/__init__.py: one step per operation).
"""

from __future__ import annotations

FLAVOR = "flavor"
SERVER = "server"

# flavor rows
UPSERT = "upsert"
DELETE = "delete"  # also a server's

# server rows
CREATE = "create"
START = "start"
STOP = "stop"
REBOOT_SOFT = "reboot-soft"
REBOOT_HARD = "reboot-hard"
PAUSE = "pause"
UNPAUSE = "unpause"
REBUILD = "rebuild"
SOFT_DELETE = "soft-delete"
RESTORE = "restore"
RESIZE = "resize"
CONFIRM_RESIZE = "confirm-resize"
REVERT_RESIZE = "revert-resize"
CONSOLE_OUTPUT = "console-output"
LOCAL_DELETE = "local-delete"  # the cluster's part of a delete the API made itself (the node is down)
EVACUATE = "evacuate"
RESCUE = "rescue"
UNRESCUE = "unrescue"
ATTACH_VOLUME = "attach-volume"
DETACH_VOLUME = "detach-volume"
SWAP_VOLUME = "swap-volume"
SNAPSHOT = "snapshot"  # createImage
BACKUP = "backup"  # createBackup
ATTACH_INTERFACE = "attach-interface"
DETACH_INTERFACE = "detach-interface"
SHELVE = "shelve"
SHELVE_OFFLOAD = "shelve_offload"
UNSHELVE = "unshelve"
LIVE_MIGRATE = "live-migrate"  # os-migrateLive

SERVER_OPERATIONS = (CREATE, DELETE, START, STOP, REBOOT_SOFT, REBOOT_HARD, PAUSE, UNPAUSE, REBUILD, SOFT_DELETE,
                     RESTORE, RESIZE, CONFIRM_RESIZE, REVERT_RESIZE, CONSOLE_OUTPUT, EVACUATE, RESCUE, UNRESCUE,
                     ATTACH_VOLUME, DETACH_VOLUME, SWAP_VOLUME, SNAPSHOT, BACKUP, ATTACH_INTERFACE, DETACH_INTERFACE,
                     LOCAL_DELETE, SHELVE, SHELVE_OFFLOAD, UNSHELVE, LIVE_MIGRATE)
