"""The WHERE clause of a server list with Nova's rules for deleted rows and ``status``, and plain lists.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors
from openkeel_compute.compute.instances.base import I, row_dicts
from openkeel_compute.db.models import INSTANCES
from openkeel_compute.model import states


def list_filter(*, is_admin: bool, project_id: str | None = None, statuses=None,
                deleted: bool | None = None, changes_since=None, changes_before=None,
                all_tenants: bool = False, version_2_38: bool = True, soft_deleted: bool | None = None):
    """The WHERE clause of a server list, with Nova's rules for deleted rows and ``status``.

    Without ``deleted``, ``changes-since`` or ``changes-before`` only live servers are listed
    (not soft-deleted ones);
    with a changes filter, deleted ones too (so a client polling for changes sees deletions).
    ``status=DELETED`` lists deleted servers for admins and is a 403 for others. An unknown status
    is a 400 from 2.38 (``version_2_38``) and returns None (an empty list) before.
    """
    clauses = []
    if not all_tenants and project_id is not None:
        clauses.append(I.project_id == project_id)
    if statuses:
        selected = states.status_filter(statuses)
        if selected.matches_nothing:
            if version_2_38:
                raise errors.InvalidStatus()
            return None
        clauses.append(I.vm_state.in_(selected.vm_states))
        if selected.task_states is not None:
            clauses.append(I.task_state.in_(selected.task_states))
        if selected.vm_states == [states.DELETED]:
            if not is_admin:
                raise errors.DeletedListForbidden()
            deleted = True
    if deleted is None and changes_since is None and changes_before is None:
        deleted = False
    # A soft-deleted server (vm_state soft-delete, waiting for its reclaim) counts as deleted
    # for lists, as in Nova: hidden from the default list, shown with the deleted ones.
    # ``soft_deleted`` (Nova's filter of that name) turns that off: a deleted list without the
    # soft-deleted servers, a live list with them.
    if deleted is True:
        clauses.append(or_(I.deleted != 0, I.vm_state == states.SOFT_DELETED) if soft_deleted in (None, True)
                       else I.deleted != 0)
    elif deleted is False:
        clauses.append(I.deleted == 0)
        if not soft_deleted:
            clauses.append(or_(I.vm_state != states.SOFT_DELETED, I.vm_state.is_(None)))
    # Nova compares updated_at alone (a row never updated is no change); a soft delete sets it,
    # so a deletion shows as a change.
    if changes_since is not None:
        clauses.append(I.updated_at >= changes_since)
    if changes_before is not None:
        clauses.append(I.updated_at <= changes_before)
    return and_(*clauses) if clauses else and_(True)


def live_rows(conn: Connection) -> list[dict]:
    """Every live (not deleted) server's row, in the order they were created."""
    return row_dicts(conn.execute(select(INSTANCES).where(I.deleted == 0).order_by(I.id)))


def list_instances(conn: Connection, where, *, limit: int | None = None) -> list[dict]:
    """Servers matching ``where`` (from ``list_filter``), newest first, as Nova's default sort."""
    if where is None:
        return []
    query = select(INSTANCES).where(where).order_by(I.created_at.desc(), I.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [dict(r) for r in conn.execute(query).mappings()]
