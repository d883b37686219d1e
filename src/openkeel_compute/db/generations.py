"""Generations raised at commit: whoever writes the server tables raises the servers counter.

The API keeps rendered server lists while the ``servers`` row of ``generations`` stays the same
(api/page_cache.py). Database triggers would raise it from the middle of a transaction: the
controller writing a hundred server rows would then hold the counter's row lock while it goes on
locking rows, and an API action that holds one of those rows and wants the counter closes a wait
cycle (a deadlock on PostgreSQL and MariaDB). Here the counter is raised by the connection itself
as the last statement before COMMIT instead: a transaction holding that row lock only commits
afterwards and waits for nothing, so the lock can never be part of a cycle.

Every write goes through a SQLAlchemy connection of an engine made by ``db.api.make_engine``
(the raw DB-API path, ``db.api.raw_reader``, only reads), so watching the statements the
connections run catches every writer, API and controller alike, without naming code paths. A
write made outside this program (an operator's SQL on the server tables) is not seen: raise the
counter in the same transaction (``UPDATE generations SET value = value + 1 WHERE name =
'servers'``).
"""

from __future__ import annotations

import re

from sqlalchemy import Engine, event

# generation -> the tables whose rows the API's kept pages of it are made of. The server lists
# (GET /servers and /servers/detail, every microversion) read the instances row (states, names,
# frozen flavor copy, addresses, lock, host and node, the scheduler hints,
# trusted certificates), user metadata, system metadata (image properties from 2.98, security
# groups), tags (2.26 and the tag filters) and the newest fault of a server in ERROR or DELETED.
# From 2.16 host_status reads the cluster's nodes as the controller publishes them (node_zones); every
# detail body lists the server's volumes (block_device_mapping).
# The ``flavor`` filter reads the flavors, whose own generation the triggers of migration 0005 raise.
WATCHED = {
    "servers": frozenset({"instances", "instance_metadata", "instance_system_metadata", "tags",
                          "instance_faults", "node_zones", "block_device_mapping"}),
}

# The table an INSERT, UPDATE or DELETE writes, whatever the dialect's spelling and quoting.
_WRITE = re.compile(r"\s*(?:INSERT(?:\s+IGNORE)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+IGNORE)?|DELETE\s+FROM)\s+"
                    r"[`\"]?(\w+)", re.IGNORECASE)
_WRITE_WORDS = ("INSERT", "UPDATE", "DELETE", "REPLACE")
_TABLE_GENERATIONS = {table: name for name, tables in WATCHED.items() for table in tables}
_PENDING = "openkeel_generations_to_raise"


def raise_statement(name: str) -> str:
    return f"UPDATE generations SET value = value + 1 WHERE name = '{name}'"


_RAISE = {name: raise_statement(name) for name in WATCHED}


def written_generation(statement: str) -> str | None:
    """The generation a statement changes the rows of, or None."""
    if not statement[:24].lstrip()[:7].upper().startswith(_WRITE_WORDS):  # every SELECT passes here: cheap
        return None
    match = _WRITE.match(statement)
    return _TABLE_GENERATIONS.get(match.group(1).lower()) if match else None


def _autocommits(conn) -> bool:
    options = conn.get_execution_options()
    return options.get("isolation_level") == "AUTOCOMMIT" or bool(options.get("openkeel_readonly"))


def watch(engine: Engine) -> None:
    """Raise the generations of what each transaction of ``engine`` wrote, right before its COMMIT."""

    @event.listens_for(engine, "after_cursor_execute")
    def _after_execute(conn, _cursor, statement, _parameters, _context, _executemany):
        name = written_generation(statement)
        if name is None:
            return
        if _autocommits(conn):
            # the write is committed already: raise the counter before anyone is told it is done
            conn.exec_driver_sql(_RAISE[name])
            return
        conn.info.setdefault(_PENDING, set()).add(name)

    @event.listens_for(engine, "commit")
    def _before_commit(conn):
        if conn.invalidated:  # its DB-API connection is gone, and the transaction with it
            return
        pending = conn.info.pop(_PENDING, None)
        if pending and not _autocommits(conn):
            # the last statement of the transaction: nothing but COMMIT comes after its row lock
            for name in sorted(pending):
                conn.exec_driver_sql(_RAISE[name])

    # Reading conn.info of an invalidated connection raises, which would hide the error that
    # invalidated it; its notes went with its DB-API connection anyway.
    @event.listens_for(engine, "rollback")
    def _after_rollback(conn):
        if not conn.invalidated:
            conn.info.pop(_PENDING, None)

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        if not conn.invalidated:
            conn.info.pop(_PENDING, None)


_READS: dict[tuple[str, ...], str] = {}


def current(raw, names: tuple[str, ...]) -> tuple[int, ...] | None:
    """The committed values of the generations ``names`` in one primary-key read, or None when the
    database lacks one (nothing may then be kept).

    ``raw``: a ``db.api.raw_reader`` connection or a SQLAlchemy Connection."""
    statement = _READS.get(names)
    if statement is None:
        listed = ", ".join(f"'{name}'" for name in names)
        statement = _READS[names] = f"SELECT name, value FROM generations WHERE name IN ({listed})"
    cursor = raw.connection.cursor()
    try:
        cursor.execute(statement)
        found = dict(cursor.fetchall())
    finally:
        cursor.close()
    if len(found) != len(names):
        return None
    return tuple(found[name] for name in names)
