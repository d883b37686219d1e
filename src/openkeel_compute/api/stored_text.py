"""Client text the database must hold: refused alike on every engine before a handler writes it.

What reaches a column it cannot fit (a NUL, a lone surrogate, an id past its column's length)
fails differently on each engine: "not found" on one, stored on SQLite, a server error on
PostgreSQL or MariaDB. These checks give one answer, a 400, everywhere.
"""

from __future__ import annotations

from openkeel_compute.api import faults

ID_LENGTH = 255  # the user_id and project_id columns of every table (Nova's VARCHAR(255))


def _unstorable(text: str) -> bool:
    """Text no database can hold or compare alike: a NUL (PostgreSQL refuses it in any string,
    the others store it) or a lone surrogate (not encodable as UTF-8)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _strings_of(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings_of(key)
            yield from _strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings_of(item)


def refuse_unstorable(params: dict, query: dict, body, ctx, *, writes: bool) -> None:
    """A 400 for client text that would reach the database unstorable, whatever the engine.

    Runs after the schemas (their own messages come first, e.g. for names) and before the handler:
    a NUL in an id would otherwise be "not found" on SQLite and MariaDB but a server error on
    PostgreSQL. The same input now has the same answer on every engine. A request that writes
    (any but GET and HEAD) also records the caller's user and project ids (the server's owner, the
    instance action's actor, the key pair's user): longer than the columns that hold them, Nova's
    write fails on MySQL or PostgreSQL (SQLite stores anything), so it is refused here on every engine.
    """
    places = (
        ("the URL", params.values()),
        ("the query string", (*query, *(v for values in query.values() for v in values))),
        ("the request body", _strings_of(body)),
        ("the token's user or project", (getattr(ctx, "user_id", None), getattr(ctx, "project_id", None))),
    )
    for place, texts in places:
        if any(isinstance(text, str) and _unstorable(text) for text in texts):
            raise faults.BadRequest(f"Invalid input received: {place} contains a NUL character or an "
                                    "invalid Unicode character.")
    if writes:
        for text in (getattr(ctx, "user_id", None), getattr(ctx, "project_id", None)):
            refuse_long_id(text, "the token's user or project")


def refuse_long_id(text, place: str) -> None:
    """A 400 for a user or project id longer than the columns that hold one (Nova's 255)."""
    if isinstance(text, str) and len(text) > ID_LENGTH:
        raise faults.BadRequest(f"Invalid input received: {place} is longer than {ID_LENGTH} characters.")
