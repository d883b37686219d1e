"""The server operations: one module per operation, registered in one table.

Each outbox operation the API writes (``model.operations``) has one row here: the step that carries it
out (``(ctx, row, server) -> Outcome``, steps/base.py), the instance-action event the loop starts before
the cluster is asked (None: the step records its own events), and how the row sits among the server's
others. A new operation is a new module and one row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from openkeel_compute.controller.steps import (
    build,
    confirm,
    console,
    delete,
    evacuate,
    interfaces,
    live_migrate,
    power,
    reboot,
    rebuild,
    rescue,
    resize,
    revert,
    shelve,
    snapshot,
    volume_attach,
)
from openkeel_compute.controller.steps.base import Context, Failed, ServerRow, Step
from openkeel_compute.model import events
from openkeel_compute.model import operations as ops


@dataclasses.dataclass(frozen=True)
class Operation:
    step: Step
    #: the instance-action event started, once per row, before the cluster is asked
    event: str | None = None
    #: False: a read that neither waits behind the server's other rows nor holds them (nor needs its row)
    ordered: bool = True
    #: True: the server's earlier rows are moot (what they would make goes with it): done without running
    supersedes: bool = False
    #: called once per pass with the rows of this operation that are their server's first: work done for
    #: several servers at once (the builds' claims in one request)
    prepare: Callable[[Context, list[ServerRow]], Any] | None = None
    #: called when the row's attempts are spent (``ServerSettings.step_attempts``), with the last reason:
    #: ends the task in Nova's fault (a Failed with its fault). None: the row is tried for as long as it
    #: takes (a delete must happen; a resize keeps its own bookkeeping)
    give_up: Callable[[Context, ServerRow, dict[str, Any], str], Failed] | None = None


TABLE: dict[str, Operation] = {
    ops.CREATE: Operation(build.run, events.BUILD, prepare=build.claim_together, give_up=build.give_up),
    ops.DELETE: Operation(delete.run, events.TERMINATE, supersedes=True),
    ops.START: Operation(power.start, events.START, give_up=power.give_up),
    ops.STOP: Operation(power.run, events.STOP, give_up=power.give_up),
    ops.REBOOT_SOFT: Operation(power.run, events.REBOOT, give_up=power.give_up),
    ops.REBOOT_HARD: Operation(reboot.run, events.REBOOT, give_up=power.give_up_in_error),
    ops.PAUSE: Operation(power.run, events.PAUSE, give_up=power.give_up),
    ops.UNPAUSE: Operation(power.run, events.UNPAUSE, give_up=power.give_up),
    ops.REBUILD: Operation(rebuild.run, give_up=power.give_up_in_error),
    ops.SOFT_DELETE: Operation(delete.soft, events.SOFT_DELETE),
    ops.RESTORE: Operation(delete.restore, events.RESTORE),
    ops.RESIZE: Operation(resize.run),
    ops.LIVE_MIGRATE: Operation(live_migrate.run),
    ops.CONFIRM_RESIZE: Operation(confirm.run, give_up=revert.give_up),
    ops.REVERT_RESIZE: Operation(revert.run, give_up=revert.give_up),
    ops.CONSOLE_OUTPUT: Operation(console.run, ordered=False),
    ops.LOCAL_DELETE: Operation(delete.local, ordered=False),
    ops.EVACUATE: Operation(evacuate.run, give_up=evacuate.give_up),
    ops.RESCUE: Operation(rescue.rescue, events.RESCUE, give_up=rescue.give_up),
    ops.UNRESCUE: Operation(rescue.unrescue, events.UNRESCUE, give_up=power.give_up_in_error),
    ops.ATTACH_VOLUME: Operation(volume_attach.attach),
    ops.DETACH_VOLUME: Operation(volume_attach.detach),
    ops.SWAP_VOLUME: Operation(volume_attach.swap),
    ops.SNAPSHOT: Operation(snapshot.run, events.SNAPSHOT, give_up=snapshot.give_up),
    ops.BACKUP: Operation(snapshot.run, events.BACKUP, give_up=snapshot.give_up),
    ops.ATTACH_INTERFACE: Operation(interfaces.attach, give_up=interfaces.give_up),
    ops.DETACH_INTERFACE: Operation(interfaces.detach),
    ops.SHELVE: Operation(shelve.shelve, events.SHELVE, give_up=snapshot.give_up),
    ops.SHELVE_OFFLOAD: Operation(shelve.offload, events.SHELVE_OFFLOAD),
    ops.UNSHELVE: Operation(shelve.unshelve),  # its event started by the step (steps/shelve.py)
}

__all__ = ["TABLE", "Operation"]
