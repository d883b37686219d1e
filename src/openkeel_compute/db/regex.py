"""Regular-expression filters matched in linear time, with one answer on every database engine.

The list APIs (flavors at 2.102, servers) filter columns with client-supplied regular
expressions. Left to the database they would run in Python's backtracking engine on SQLite (a
``(.*.*)*X`` holds a worker for seconds and everyone queued behind it), in PostgreSQL's and
MariaDB's own dialects elsewhere (each refusing a different set of patterns, with a server error).

So patterns are compiled with RE2, which matches in time linear in the text and refuses the
constructs that need backtracking (backreferences, lookaround, possessive and atomic groups),
with Python's syntax and Unicode classes carried over (db/python_regex.py: ``\\w`` is Unicode there),
and the matching happens here, in Python: the database reads the filtered column of the rows the
other criteria keep, and the query then narrows to the keys whose value matched. Ordering, markers
and limits stay in SQL. A pattern Python accepts but RE2 refuses is a client error (400).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, and_, bindparam, select
from sqlalchemy.sql.elements import ColumnElement

from openkeel_compute.db import python_regex

_BOUND_KEYS = 1000


@functools.cache
def _re2():
    """RE2 and its options, loaded by the first pattern: a worker that never filters by pattern does
    without it (RE2 and the C++ runtime under it are ~2.5 MiB of every worker)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # a refused pattern is the client's mistake, not a log line
    options.max_mem = 8 << 20  # the compiled program's memory bound
    return re2, options


Unsupported = python_regex.Unsupported


def _compile_re2(program: str):
    re2, options = _re2()
    try:
        return re2.compile(program, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise Unsupported(reason) from None


@functools.lru_cache(maxsize=256)  # a page after page of one filter compiles it once
def compile_pattern(pattern: str) -> python_regex.Pattern:
    """A compiled linear-time pattern with Python's syntax and Unicode meaning (db/python_regex.py);
    ``re.error`` when Python's syntax refuses it (Nova's test), ``Unsupported`` when only the
    linear-time engine does."""
    re.compile(pattern)
    return python_regex.Pattern(pattern, _compile_re2)


def supported(pattern: str) -> bool:
    """Whether ``pattern`` is valid for Python and runnable in linear time."""
    try:
        compile_pattern(pattern)
    except (re.error, Unsupported, TypeError):
        return False
    return True


def search(pattern, text) -> bool:
    """SQL's ``text REGEXP pattern``: NULL never matches; non-strings match on their text."""
    if text is None:
        return False
    return pattern.search(text if isinstance(text, str) else str(text))


Test = tuple[ColumnElement, Callable[[object], bool]]


def narrow(conn: Connection, key: ColumnElement, where, tests: Sequence[Test]):
    """``where`` narrowed to the rows whose columns pass every test, or None when none does.

    The database reads each kept row's key and tested columns once; the tests run here.
    """
    if not tests:
        return where
    columns = [column for column, _ in tests]
    query = select(key, *columns)
    if where is not None:
        query = query.where(where)
    keys = [row[0] for row in conn.execute(query)
            if all(test(value) for (_, test), value in zip(tests, row[1:], strict=True))]
    if not keys:
        return None
    # Many keys are written into the statement rather than bound one by one: PostgreSQL's
    # protocol takes at most 65,535 parameters a statement.
    clause = key.in_(bindparam("regex_keys", keys, expanding=True, literal_execute=len(keys) > _BOUND_KEYS))
    return clause if where is None else and_(where, clause)
