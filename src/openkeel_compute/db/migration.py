"""`openkeel-compute db sync` / `db version`: Alembic migrations without an alembic.ini."""

from __future__ import annotations

import os

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = os.path.join(os.path.dirname(__file__), "migrations")


def _config(connection=None) -> Config:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def sync(engine: Engine, revision: str = "head") -> None:
    """Create or upgrade the schema to ``revision``."""
    with engine.connect() as connection:
        command.upgrade(_config(connection), revision)
        connection.commit()


def downgrade(engine: Engine, revision: str) -> None:
    with engine.connect() as connection:
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
