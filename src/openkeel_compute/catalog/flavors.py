"""The flavor catalogue: queries and changes, each change recorded in the outbox.

Functions take a SQLAlchemy Connection already inside a transaction (``db.api.transaction``)
or a read snapshot (``db.api.reader``), so one API write is one transaction, outbox row included.
Reads use Core selects: a 1,000-flavor list is a handful of queries, never one per flavor.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Boolean,
    Connection,
    Integer,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    false,
    func,
    insert,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.exc import IntegrityError

from openkeel_compute.catalog import errors
from openkeel_compute.db import models, regex
from openkeel_compute.model import operations

FLAVORS = models.FLAVORS
EXTRA_SPECS = models.FLAVOR_EXTRA_SPECS
PROJECTS = models.FLAVOR_PROJECTS
OUTBOX = models.OUTBOX
GENERATIONS = models.GENERATIONS

_NULLABLE_SORT_KEYS = {"description", "vcpu_weight", "updated_at"}

# What the API shows of a flavor. Timestamps are not shown and cost the most to decode, so list
# queries leave them out.
VIEW_COLUMNS = [FLAVORS.c[name] for name in (
    "id", "flavorid", "name", "memory_mb", "vcpus", "root_gb", "ephemeral_gb", "swap", "rxtx_factor",
    "disabled", "is_public", "description",
)]


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who asks: visibility depends on the project and on being an administrator."""

    project_id: str | None
    is_admin: bool


@dataclasses.dataclass
class ListQuery:
    is_public: bool | None = True
    disabled: bool | None = None
    min_memory_mb: int | None = None
    min_root_gb: int | None = None
    name_regex: str | None = None
    sort_key: str = "flavorid"
    sort_dir: str = "asc"
    limit: int | None = None
    marker: str | None = None


def _visible_to(caller: Caller):
    """Public flavors, or private ones whose access list holds the caller's project."""
    shared = exists().where(PROJECTS.c.flavor_id == FLAVORS.c.id, PROJECTS.c.project_id == caller.project_id)
    return or_(FLAVORS.c.is_public == true(), shared)


# Hot statements are built once; executing them only binds parameters. The "visible" variants
# add the caller's project as the bound parameter "project_id".
_VISIBLE_TO_BOUND_PROJECT = or_(
    FLAVORS.c.is_public == true(),
    exists().where(PROJECTS.c.flavor_id == FLAVORS.c.id, PROJECTS.c.project_id == bindparam("project_id")),
)
_GET = select(FLAVORS).where(FLAVORS.c.flavorid == bindparam("flavorid"))
_GET_VISIBLE = _GET.where(_VISIBLE_TO_BOUND_PROJECT)
_SPECS_OF_ONE = (
    select(EXTRA_SPECS.c.key, EXTRA_SPECS.c.value)
    .where(EXTRA_SPECS.c.flavor_id == bindparam("flavor_id"))
    .order_by(EXTRA_SPECS.c.key)
)


def get(conn: Connection, flavorid: str, caller: Caller | None = None) -> dict:
    """One flavor by its API id; a private flavor the caller cannot see is "not found"."""
    if caller is not None and not caller.is_admin:
        result = conn.execute(_GET_VISIBLE, {"flavorid": flavorid, "project_id": caller.project_id})
    else:
        result = conn.execute(_GET, {"flavorid": flavorid})
    rows = _rows(result)
    if not rows:
        raise errors.FlavorNotFound(flavorid)
    return rows[0]


_SHOW_SPECS = EXTRA_SPECS.alias("spec")
_SHOW_FROM = FLAVORS.outerjoin(_SHOW_SPECS, _SHOW_SPECS.c.flavor_id == FLAVORS.c.id)
_SHOW = (
    select(*VIEW_COLUMNS, _SHOW_SPECS.c.key, _SHOW_SPECS.c.value)
    .select_from(_SHOW_FROM)
    .where(FLAVORS.c.flavorid == bindparam("flavorid"))
    .order_by(_SHOW_SPECS.c.key)
)
_SHOW_VISIBLE = _SHOW.where(_VISIBLE_TO_BOUND_PROJECT)
_SHOW_BARE = select(*VIEW_COLUMNS).where(FLAVORS.c.flavorid == bindparam("flavorid"))
_SHOW_BARE_VISIBLE = _SHOW_BARE.where(_VISIBLE_TO_BOUND_PROJECT)
_VIEW_NAMES = [column.name for column in VIEW_COLUMNS]


_RAW_SQL: dict[tuple[int, str], tuple[str, tuple[str, ...] | None]] = {}


def _fetch_raw(conn: Connection, statement, params: dict | None = None) -> list[tuple]:
    """Rows of a prebuilt statement through the DB-API cursor, without SQLAlchemy's result layer.

    For the hottest reads, whose columns are plain ints, strings, floats and booleans (SQLite and
    MariaDB give booleans as 0/1, which the views pass through bool()). SQLAlchemy compiles the
    statement once per dialect; skipping its result processing also skips the driver building a
    cursor description per query (a tenth of a flavor show's time on PostgreSQL).
    """
    dialect = conn.dialect
    cache_key = (id(statement), dialect.name)
    compiled = _RAW_SQL.get(cache_key)
    if compiled is None:
        query = statement.compile(dialect=dialect)
        compiled = _RAW_SQL[cache_key] = (str(query), query.positiontup if dialect.positional else None)
    sql, positions = compiled
    cursor = conn.connection.cursor()
    try:
        if not params:
            cursor.execute(sql)
        else:
            cursor.execute(sql, [params[name] for name in positions] if positions is not None else params)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _fetch_one_flavor(conn: Connection, statement, visible_statement, flavorid: str,
                      caller: Caller | None) -> list[tuple]:
    """Rows about one flavor; for a non-admin caller only a flavor it may see (else "not found")."""
    if caller is not None and not caller.is_admin:
        rows = _fetch_raw(conn, visible_statement, {"flavorid": flavorid, "project_id": caller.project_id})
    else:
        rows = _fetch_raw(conn, statement, {"flavorid": flavorid})
    if not rows:
        raise errors.FlavorNotFound(flavorid)
    return rows


def show(conn: Connection, flavorid: str, caller: Caller | None = None, *,
         with_extra_specs: bool = True) -> tuple[dict, dict[str, str] | None]:
    """One flavor, with its extra specs in the same statement (one row per spec) when wanted:
    GET /flavors/{id}. Without them (before 2.61, or when policy hides them) specs are None."""
    if not with_extra_specs:
        row = _fetch_one_flavor(conn, _SHOW_BARE, _SHOW_BARE_VISIBLE, flavorid, caller)[0]
        return dict(zip(_VIEW_NAMES, row)), None
    rows = _fetch_one_flavor(conn, _SHOW, _SHOW_VISIBLE, flavorid, caller)
    width = len(_VIEW_NAMES)
    flavor = dict(zip(_VIEW_NAMES, rows[0]))
    specs = {row[width]: row[width + 1] for row in rows if row[width] is not None}
    return flavor, specs


_ACCESS_OF = PROJECTS.alias("access")
_ACCESS = (
    select(FLAVORS.c.id, FLAVORS.c.flavorid, FLAVORS.c.is_public, _ACCESS_OF.c.project_id)
    .select_from(FLAVORS.outerjoin(_ACCESS_OF, _ACCESS_OF.c.flavor_id == FLAVORS.c.id))
    .where(FLAVORS.c.flavorid == bindparam("flavorid"))
    .order_by(_ACCESS_OF.c.project_id)
)
_ACCESS_VISIBLE = _ACCESS.where(_VISIBLE_TO_BOUND_PROJECT)


def access_list(conn: Connection, flavorid: str, caller: Caller | None = None) -> tuple[dict, list[str]]:
    """A flavor (id, flavorid, is_public) and its access list, ordered by project, in one statement."""
    rows = _fetch_one_flavor(conn, _ACCESS, _ACCESS_VISIBLE, flavorid, caller)
    internal_id, api_id, is_public, _ = rows[0]
    flavor = {"id": internal_id, "flavorid": api_id, "is_public": is_public}
    return flavor, [row[3] for row in rows if row[3] is not None]


def extra_specs_of(conn: Connection, internal_ids: list[int]) -> dict[int, dict[str, str]]:
    """Extra specs of many flavors in one query: internal id → {key: value}."""
    result: dict[int, dict[str, str]] = {i: {} for i in internal_ids}
    if not internal_ids:
        return result
    if len(internal_ids) == 1:
        result[internal_ids[0]] = dict(conn.execute(_SPECS_OF_ONE, {"flavor_id": internal_ids[0]}).all())
        return result
    if len(internal_ids) < 500:
        query = (
            select(EXTRA_SPECS.c.flavor_id, EXTRA_SPECS.c.key, EXTRA_SPECS.c.value)
            .where(EXTRA_SPECS.c.flavor_id.in_(internal_ids))
            .order_by(EXTRA_SPECS.c.key)
        )
        rows: Sequence[Any] = conn.execute(query).all()
    else:
        rows = _fetch_raw(conn, _ALL_SPECS)
    for flavor_id, key, value in rows:
        specs = result.get(flavor_id)
        if specs is not None:
            specs[key] = value
    return result


# Every extra spec of the catalogue (a long list page needs most of them), read raw: plain strings
# and ints need no result processing.
_ALL_SPECS = select(EXTRA_SPECS.c.flavor_id, EXTRA_SPECS.c.key, EXTRA_SPECS.c.value).order_by(EXTRA_SPECS.c.key)


def _rows(result) -> list[dict]:
    keys = list(result.keys())
    return [dict(zip(keys, row)) for row in result.all()]


def projects_of(conn: Connection, internal_id: int) -> list[str]:
    # Ordered by project id: Nova reads the access rows through the (flavor_id, project_id)
    # unique index, so its lists (API and notifications) come out in that order, not insertion's.
    query = (select(PROJECTS.c.project_id).where(PROJECTS.c.flavor_id == internal_id)
             .order_by(PROJECTS.c.project_id))
    return [row[0] for row in conn.execute(query)]


def _sort_columns(sort_key: str):
    return [FLAVORS.c[sort_key], FLAVORS.c.id]


def list_flavors(conn: Connection, caller: Caller, q: ListQuery) -> list[dict]:
    """Nova's flavor list: filters, then (sort_key, id) ordering in sort_dir, then marker and limit."""
    query = select(*VIEW_COLUMNS)
    if q.min_memory_mb is not None:
        query = query.where(_at_least(FLAVORS.c.memory_mb, q.min_memory_mb))
    if q.min_root_gb is not None:
        query = query.where(_at_least(FLAVORS.c.root_gb, q.min_root_gb))
    if q.disabled is not None:
        query = query.where(FLAVORS.c.disabled == (true() if q.disabled else false()))
    if q.is_public is not None:
        public = FLAVORS.c.is_public == (true() if q.is_public else false())
        if q.is_public and caller.project_id is not None:
            query = query.where(or_(public, _visible_to(caller)))
        else:
            query = query.where(public)
    if q.name_regex is not None:
        try:
            pattern = regex.compile_pattern(q.name_regex)
        except (re.error, regex.Unsupported) as exc:
            raise errors.InvalidFilter(f"Invalid name filter [{q.name_regex}]: {exc}") from None
        where = regex.narrow(conn, FLAVORS.c.id, query.whereclause,
                             [(FLAVORS.c.name, functools.partial(regex.search, pattern))])
        if where is None:
            return []
        query = select(*VIEW_COLUMNS).where(where)
    columns = _sort_columns(q.sort_key)
    descending = q.sort_dir == "desc"
    if q.marker is not None:
        # The marker is looked up with the caller's visibility: a private flavor the caller was
        # not granted is "not found" as a marker too.
        marker_query = select(FLAVORS).where(FLAVORS.c.flavorid == q.marker)
        if not caller.is_admin:
            marker_query = marker_query.where(_visible_to(caller))
        marker = conn.execute(marker_query).mappings().first()
        if marker is None:
            raise errors.MarkerNotFound(q.marker)
        query = query.where(_after_marker(columns, [marker[c.name] for c in columns], descending))
    order = []
    for column in columns:
        if column.name in _NULLABLE_SORT_KEYS:
            # NULLs first in ascending order on every engine (SQLite's and MariaDB's own rule).
            nulls_last = column.is_not(None)
            order.append(nulls_last.desc() if descending else nulls_last.asc())
        order.append(column.desc() if descending else column.asc())
    query = query.order_by(*order)
    if q.limit is not None:
        query = query.limit(q.limit)
    return _rows(conn.execute(query))


_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def _at_least(column, value: int):
    """``column >= value`` for a 32-bit column and any integer: a bound beyond the column's range
    is decided here (PostgreSQL refuses to compare with it, SQLite overflows past 64 bits)."""
    if value > _INT32_MAX:
        return false()
    if value < _INT32_MIN:
        return true()
    return column >= value


def _after_marker(columns, values, descending: bool):
    """Rows after the marker, with Nova's criteria (oslo.db's paginate_query): for each sort
    column whose marker value is not NULL, "equal on the earlier non-NULL columns and beyond on
    this one"; a NULL marker value contributes nothing (rows are then only "beyond" on the later
    columns, whatever their value here), and NULL rows are never beyond a value. Booleans are
    compared as integers."""
    criteria = []
    for i, column in enumerate(columns):
        value = values[i]
        if value is None:
            continue
        equal_before = [columns[j] == values[j] for j in range(i) if values[j] is not None]
        if isinstance(column.type, Boolean):
            column, value = cast(column, Integer), int(value)
        beyond = column < value if descending else column > value
        criteria.append(and_(*equal_before, beyond))
    return or_(*criteria)


def generate_flavor_id() -> str:
    """The id of a flavor created without one (Nova: a random UUID4)."""
    return str(uuid.uuid4())


# Write statements are built once as well: building Core DML per call cost more CPU than executing
# it (an upsert's `excluded` copies the table's columns each time it is built). Parameters are bound
# at execution; several rows make an executemany.
_INSERT_FLAVOR = insert(FLAVORS)
_INSERT_OUTBOX = insert(OUTBOX)
_INSERT_PROJECT = insert(PROJECTS)
_UPDATE_FLAVOR = update(FLAVORS).where(FLAVORS.c.flavorid == bindparam("api_id"))
_DELETE_SPEC = delete(EXTRA_SPECS).where(EXTRA_SPECS.c.flavor_id == bindparam("internal_id"),
                                         EXTRA_SPECS.c.key == bindparam("spec_key"))
_DELETE_PROJECTS_OF = delete(PROJECTS).where(PROJECTS.c.flavor_id == bindparam("internal_id"))
_DELETE_PROJECT = _DELETE_PROJECTS_OF.where(PROJECTS.c.project_id == bindparam("project"))
_DELETE_PROJECTS_RETURNING = _DELETE_PROJECTS_OF.returning(PROJECTS.c.project_id)
_DELETE_FLAVOR = delete(FLAVORS).where(FLAVORS.c.id == bindparam("internal_id"))


_GENERATION = select(GENERATIONS.c.value).where(GENERATIONS.c.name == bindparam("generation"))


def generation(conn) -> int | None:
    """The catalogue's generation: the database's triggers raise it with every committed change to
    flavors, their extra specs or their access, whoever writes (migration 0005); None when the
    database has no counter, and nothing may then be cached.

    ``conn`` is a Connection or a ``db.api.raw_reader`` connection (one primary-key read)."""
    rows = _fetch_raw(conn, _GENERATION, {"generation": "flavors"})
    return rows[0][0] if rows else None


def _outbox(conn: Connection, operation: str, flavorid: str, payload: dict | None = None) -> None:
    conn.execute(_INSERT_OUTBOX, {"kind": operations.FLAVOR, "object_id": flavorid, "operation": operation,
                                  "payload": payload, "created_at": models.utcnow(), "attempts": 0})


def create(conn: Connection, *, name: str, memory_mb: int, vcpus: int, root_gb: int, ephemeral_gb: int = 0,
           flavorid=None, swap: int = 0, rxtx_factor: float = 1.0, is_public: bool = True,
           description: str | None = None) -> dict:
    """Insert a flavor; the database's unique constraints decide duplicates, even under races."""
    if not flavorid:
        flavorid = generate_flavor_id()
    values = {
        "flavorid": str(flavorid),
        "name": name.strip() if isinstance(name, str) else name,
        "memory_mb": memory_mb,
        "vcpus": vcpus,
        "root_gb": root_gb,
        "ephemeral_gb": ephemeral_gb,
        "swap": swap,
        "rxtx_factor": rxtx_factor,
        "vcpu_weight": None,
        "disabled": False,
        "is_public": is_public,
        "description": description,
        "created_at": models.utcnow(),
        "updated_at": None,
    }
    # No SAVEPOINT: a duplicate ends the whole transaction anyway (nothing else was written),
    # which spares two round trips per create on a database server.
    try:
        result = conn.execute(_INSERT_FLAVOR, values)
    except IntegrityError as exc:
        if "flavorid" in str(exc.orig):
            raise errors.FlavorIdExists(values["flavorid"]) from None
        raise errors.FlavorExists(values["name"]) from None
    values["id"] = result.inserted_primary_key[0]  # type: ignore[index]  # one row inserted: its key
    _outbox(conn, operations.UPSERT, str(values["flavorid"]))
    return values


def update_description(conn: Connection, flavorid: str, description: str | None) -> dict:
    # Setting the description it already has changes nothing, updated_at included (Nova's ORM
    # issues no UPDATE then); updated_at is visible through sort_key=updated_at.
    values: dict[str, Any] = {"description": description}
    if get(conn, flavorid)["description"] != description:
        values["updated_at"] = models.utcnow()
    result = conn.execute(_UPDATE_FLAVOR, {"api_id": flavorid, **values})
    if result.rowcount == 0:
        raise errors.FlavorNotFound(flavorid)
    _outbox(conn, operations.UPSERT, flavorid)
    return get(conn, flavorid)


def destroy(conn: Connection, flavorid: str, *, with_extra_specs: bool = True) -> dict:
    """Delete a flavor with its access rows and extra specs, in the caller's transaction.

    Returns the flavor as it was, with its projects (and its extra specs unless not wanted:
    only a notification needs them).
    """
    flavor = get(conn, flavorid)
    if with_extra_specs:
        flavor["extra_specs"] = extra_specs_of(conn, [flavor["id"]])[flavor["id"]]
    flavor["projects"] = _delete_projects(conn, flavor["id"])
    # The extra specs go with the flavor row: ON DELETE CASCADE on every engine (SQLite's
    # foreign keys are on for every connection, db/api.py).
    # A concurrent delete of the same flavor waits on this row and then finds nothing to delete:
    # exactly one caller wins; the others roll back and answer "not found".
    if conn.execute(_DELETE_FLAVOR, {"internal_id": flavor["id"]}).rowcount != 1:
        raise errors.FlavorNotFound(flavorid)
    _outbox(conn, operations.DELETE, flavorid, {"is_public": flavor["is_public"], "projects": flavor["projects"]})
    return flavor


def _delete_projects(conn: Connection, internal_id: int) -> list[str]:
    """Delete a flavor's access rows; their project ids, ordered as projects_of() orders them.

    One DELETE … RETURNING where the engine has it (PostgreSQL, SQLite >= 3.35, MariaDB >= 10.5):
    a round trip less per flavor delete than reading the rows first.
    """
    params = {"internal_id": internal_id}
    if not conn.dialect.delete_returning:
        projects = projects_of(conn, internal_id)
        conn.execute(_DELETE_PROJECTS_OF, params)
        return projects
    return sorted(row[0] for row in conn.execute(_DELETE_PROJECTS_RETURNING, params))


def add_access(conn: Connection, flavor: dict, project_id: str) -> list[str]:
    try:
        with conn.begin_nested():
            conn.execute(_INSERT_PROJECT,
                         {"flavor_id": flavor["id"], "project_id": project_id, "created_at": models.utcnow()})
    except IntegrityError:
        if get_or_none(conn, flavor["flavorid"]) is None:
            raise errors.FlavorNotFound(flavor["flavorid"]) from None
        raise errors.FlavorAccessExists(flavor["id"], project_id) from None
    _outbox(conn, operations.UPSERT, flavor["flavorid"])
    return projects_of(conn, flavor["id"])


def remove_access(conn: Connection, flavor: dict, project_id: str) -> list[str]:
    result = conn.execute(_DELETE_PROJECT, {"internal_id": flavor["id"], "project": project_id})
    if result.rowcount == 0:
        raise errors.FlavorAccessNotFound(flavor["id"], project_id)
    _outbox(conn, operations.UPSERT, flavor["flavorid"])
    return projects_of(conn, flavor["id"])


def get_or_none(conn: Connection, flavorid: str) -> dict | None:
    """One flavor by its API id whatever its visibility, or None."""
    rows = _rows(conn.execute(_GET, {"flavorid": flavorid}))
    return rows[0] if rows else None


@functools.cache
def _upsert_statement(dialect: str):
    """The extra-spec upsert for an engine (``dialect.name``), built on first use."""
    stmt: Any  # PostgreSQL's or SQLite's insert: both have on_conflict_do_update
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        stmt = postgresql_insert(EXTRA_SPECS)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(EXTRA_SPECS)
    elif dialect in ("mysql", "mariadb"):
        from sqlalchemy.dialects.mysql import insert as mysql_insert

        stmt = mysql_insert(EXTRA_SPECS)
        return stmt.on_duplicate_key_update(value=stmt.inserted.value, updated_at=stmt.inserted.created_at)
    else:  # pragma: no cover - only the three supported engines
        raise RuntimeError(f"unsupported database {dialect}")
    return stmt.on_conflict_do_update(
        index_elements=[EXTRA_SPECS.c.flavor_id, EXTRA_SPECS.c.key],
        set_={"value": stmt.excluded.value, "updated_at": stmt.excluded.created_at},
    )


def set_extra_specs(conn: Connection, flavor: dict, specs: dict[str, str]) -> None:
    """Create or update keys in one statement: concurrent writers of one key never collide."""
    if not specs:
        return
    now = models.utcnow()
    rows = [{"flavor_id": flavor["id"], "key": k, "value": v, "created_at": now} for k, v in specs.items()]
    try:
        conn.execute(_upsert_statement(conn.dialect.name), rows)
    except IntegrityError:
        # The flavor went away between our read and this write; the transaction is abandoned.
        raise errors.FlavorNotFound(flavor["flavorid"]) from None
    _outbox(conn, operations.UPSERT, flavor["flavorid"])


def delete_extra_spec(conn: Connection, flavor: dict, key: str) -> None:
    result = conn.execute(_DELETE_SPEC, {"internal_id": flavor["id"], "spec_key": key})
    if result.rowcount == 0:
        raise errors.ExtraSpecNotFound(flavor["flavorid"], key)
    _outbox(conn, operations.UPSERT, flavor["flavorid"])


def count(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(FLAVORS)).scalar_one()
