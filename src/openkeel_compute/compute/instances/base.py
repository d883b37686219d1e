"""Who asks, the instances column namespace and result helpers: what every module of the package shares."""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass

from openkeel_compute.db.models import INSTANCES

I = INSTANCES.c  # the column namespace: I.task_state


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asks: the request's user, project, admin flag and request id (instance actions)."""

    user_id: str
    project_id: str
    is_admin: bool = False
    request_id: str | None = None


def new_request_id() -> str:
    return f"req-{uuidlib.uuid4()}"


def first_row(result) -> dict | None:
    row = result.mappings().first()
    return dict(row) if row is not None else None


def row_dicts(result) -> list[dict]:
    """A result's rows as dicts: the keys taken once, not once per row as RowMapping does."""
    keys = tuple(result.keys())
    return [dict(zip(keys, row)) for row in result]
