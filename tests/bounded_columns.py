"""Every write to a bounded column stays within its bound, on every engine the tests use.

PostgreSQL and MariaDB refuse a value longer than its VARCHAR(n) column; SQLite stores it. A write that
only SQLite takes (a resize's bookkeeping once was one) passes every SQLite test and fails in production.
``install()`` makes every test's database refuse such a write as PostgreSQL does: before each INSERT or
UPDATE is sent, each value written to a column of a bounded string type (the models' ``String(n)``) is
compared with the bound, and an over-long one raises ``ColumnBoundExceeded`` naming the table, the column
and the value's length. It reads the compiled statement's own bind parameters, so it sees what the code
really writes, through every path (the API, the controller, the migrations' data moves).
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

_MULTI = re.compile(r"^(?P<key>.+)_m\d+$")  # a multi-row INSERT's parameters: "<column>_m0", ...


class ColumnBoundExceeded(sa.exc.DataError):  # type: ignore[misc]
    def __init__(self, table: str, column: str, length: int, bound: int) -> None:
        Exception.__init__(self, f"{table}.{column}: a value of {length} characters written to a column of "
                                 f"{bound} (PostgreSQL and MariaDB refuse it)")
        self.table, self.column, self.length, self.bound = table, column, length, bound


def _bound(column: sa.Column) -> int | None:
    kind = column.type
    if isinstance(kind, sa.types.TypeDecorator):
        kind = kind.impl_instance
    length = getattr(kind, "length", None) if isinstance(kind, sa.String) else None
    return int(length) if length else None


def check(compiled, parameters) -> None:
    """Raise ColumnBoundExceeded when an INSERT or UPDATE writes a value over its column's bound."""
    statement = getattr(compiled, "statement", None)
    if not isinstance(statement, sa.Insert | sa.Update):
        return
    table = statement.table
    bounds = {c.key: b for c in table.columns if (b := _bound(c)) is not None}
    if not bounds:
        return
    for row in parameters or ():
        for name, value in row.items():
            if not isinstance(value, str):
                continue
            key = name if name in bounds else (m.group("key") if (m := _MULTI.match(name)) else None)
            # only the values written: WHERE's parameters are named "<column>_1", "<column>_2", ...
            if key in bounds and len(value) > bounds[key]:
                raise ColumnBoundExceeded(table.name, key, len(value), bounds[key])


def _before_cursor_execute(conn, cursor, statement, parameters, context, executemany) -> None:
    compiled = getattr(context, "compiled", None)
    if compiled is not None:
        check(compiled, getattr(context, "compiled_parameters", None))


def install() -> None:
    if not event.contains(Engine, "before_cursor_execute", _before_cursor_execute):
        event.listen(Engine, "before_cursor_execute", _before_cursor_execute)
