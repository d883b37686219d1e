"""`openkeel-compute db sync` / `db version`: Alembic migrations without an alembic.ini."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

MIGRATIONS = os.path.join(os.path.dirname(__file__), "migrations")


def _config(connection=None) -> Config:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@contextlib.contextmanager
def _sqlite_foreign_keys_off(connection: Connection) -> Iterator[None]:
    """SQLite's way to change a table: with foreign keys off, outside any transaction.

    A migration that rebuilds a table (copy, drop, rename) would otherwise have the drop delete the rows
    that refer to it (ON DELETE CASCADE) or fail on them. The engine turns foreign keys on for every
    connection (db/api.py); this connection gets them back before it returns to the pool.
    """
    if connection.dialect.name != "sqlite":
        yield
        return
    driver = connection.connection.driver_connection
    assert driver is not None and not connection.in_transaction()
    driver.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        if connection.in_transaction():
            connection.rollback()
        driver.execute("PRAGMA foreign_keys=ON")


def sync(engine: Engine, revision: str = "head") -> None:
    """Create or upgrade the schema to ``revision``."""
    with engine.connect() as connection, _sqlite_foreign_keys_off(connection):
        command.upgrade(_config(connection), revision)
        connection.commit()


def downgrade(engine: Engine, revision: str) -> None:
    with engine.connect() as connection, _sqlite_foreign_keys_off(connection):
        command.downgrade(_config(connection), revision)
        connection.commit()


def current(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head() -> str:
    found = ScriptDirectory.from_config(_config()).get_current_head()
    assert found is not None, "the migration scripts have one head"
    return found
