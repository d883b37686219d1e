"""The controller's side of the outbox: read pending rows in order, mark them done or failed."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection

from sqlalchemy import Engine, and_, func, select, update

from openkeel_compute.db import models
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.model import operations

OUTBOX = models.OUTBOX
_ERROR_MAX = 2000


@dataclasses.dataclass(frozen=True)
class Row:
    id: int
    flavor_id: str
    operation: str
    attempts: int
    last_error: str | None
    created_at: dt.datetime


def _pending():
    return and_(OUTBOX.c.done_at.is_(None), OUTBOX.c.kind == operations.FLAVOR)


def pending(engine: Engine, limit: int, exclude: Collection[str] = ()) -> list[Row]:
    """The oldest pending rows, in id order, leaving out the flavors in ``exclude`` (backing off)."""
    query = (select(OUTBOX.c.id, OUTBOX.c.object_id, OUTBOX.c.operation, OUTBOX.c.attempts, OUTBOX.c.last_error,
                    OUTBOX.c.created_at)
             .where(_pending()).order_by(OUTBOX.c.id).limit(limit))
    if exclude:
        query = query.where(OUTBOX.c.object_id.not_in(sorted(exclude)))
    with reader(engine) as conn:
        return [Row(*r) for r in conn.execute(query)]


def pending_for(engine: Engine, flavor_id: str | None = None) -> list[Row]:
    query = (select(OUTBOX.c.id, OUTBOX.c.object_id, OUTBOX.c.operation, OUTBOX.c.attempts, OUTBOX.c.last_error,
                    OUTBOX.c.created_at).where(_pending()).order_by(OUTBOX.c.id))
    if flavor_id is not None:
        query = query.where(OUTBOX.c.object_id == flavor_id)
    with reader(engine) as conn:
        return [Row(*r) for r in conn.execute(query)]


def summary(engine: Engine) -> tuple[int, int | None, dt.datetime | None]:
    """(pending count, highest pending id, creation time of the oldest pending row)."""
    query = select(func.count(), func.max(OUTBOX.c.id), func.min(OUTBOX.c.created_at)).where(_pending())
    with reader(engine) as conn:
        count, max_id, oldest = conn.execute(query).one()
    return int(count), max_id, oldest


def mark_done(engine: Engine, ids: Collection[int]) -> None:
    if not ids:
        return
    with transaction(engine) as conn:
        conn.execute(update(OUTBOX).where(OUTBOX.c.id.in_(sorted(ids)), OUTBOX.c.done_at.is_(None))
                     .values(done_at=models.utcnow()))


def mark_done_up_to(engine: Engine, max_id: int, except_flavors: Collection[str] = ()) -> int:
    """Mark every pending row with id <= max_id done, except those of ``except_flavors``."""
    condition = and_(_pending(), OUTBOX.c.id <= max_id)
    if except_flavors:
        condition = and_(condition, OUTBOX.c.object_id.not_in(sorted(except_flavors)))
    with transaction(engine) as conn:
        return conn.execute(update(OUTBOX).where(condition).values(done_at=models.utcnow())).rowcount


def record_failure(engine: Engine, ids: Collection[int], error: str) -> None:
    if not ids:
        return
    with transaction(engine) as conn:
        conn.execute(update(OUTBOX).where(OUTBOX.c.id.in_(sorted(ids)), OUTBOX.c.done_at.is_(None))
                     .values(attempts=OUTBOX.c.attempts + 1, last_error=error[:_ERROR_MAX]))


def record_failure_by_flavor(engine: Engine, max_id: int, errors: dict[str, str]) -> None:
    """Note an error on the pending rows (id <= max_id) of each flavor in ``errors``."""
    if not errors:
        return
    with transaction(engine) as conn:
        for flavor_id, error in errors.items():
            conn.execute(update(OUTBOX).where(_pending(), OUTBOX.c.id <= max_id, OUTBOX.c.object_id == flavor_id)
                         .values(attempts=OUTBOX.c.attempts + 1, last_error=error[:_ERROR_MAX]))
