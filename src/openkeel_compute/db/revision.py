"""The schema revision a database is at and the one this release needs, without loading Alembic.

``serve`` checks both before it listens; Alembic (with Mako and its script machinery) would stay
resident in the serving process for nothing. ``db sync`` and ``db version`` use Alembic itself
(db/migration.py), whose answers these match (tests/db/test_revision.py).
"""

from __future__ import annotations

import os
import re

from sqlalchemy import Engine, inspect, text

VERSIONS = os.path.join(os.path.dirname(__file__), "migrations", "versions")
_ASSIGN = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(.+?)\s*$", re.MULTILINE)
_NAME = re.compile(r"['\"]([^'\"]+)['\"]")


def current(engine: Engine) -> str | None:
    """The revision recorded in the database, or None when it has no schema yet."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def head(versions: str = VERSIONS) -> str:
    """The one revision of the migration scripts that no other script revises."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for name in os.listdir(versions):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(versions, name), encoding="utf-8") as f:
            for key, value in _ASSIGN.findall(f.read()):
                names = set(_NAME.findall(value))
                (revisions if key == "revision" else revised).update(names)
    heads = revisions - revised
    if len(heads) != 1:
        raise RuntimeError(f"the migration scripts in {versions} have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()
