"""Generations: a counter per cached collection, raised by the database itself on every change.

Triggers raise the counter in the transaction of any INSERT, UPDATE or DELETE of the
collection's tables, whoever writes (the API, the controller, an operator's SQL such as
disabling a flavor, which Nova offers no API for): the API reuses a rendered list only while
the counter it was rendered at is still the committed one (api/page_cache.py).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

# generation -> the tables whose rows make it
WATCHED = {"flavors": ("flavors", "flavor_extra_specs", "flavor_projects")}
EVENTS = ("insert", "update", "delete")


def _bump(generation):
    return f"UPDATE generations SET value = value + 1 WHERE name = '{generation}'"


def _create_triggers(dialect, generation, tables):
    if dialect == "postgresql":
        function = f"bump_{generation}_generation"
        op.execute(f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                   f"BEGIN {_bump(generation)}; RETURN NULL; END $$")
        for table in tables:
            # once per statement, whatever the number of rows
            op.execute(f"CREATE TRIGGER {table}_generation AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                       f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {function}()")
        return
    for table in tables:
        for event in EVENTS:
            if dialect == "sqlite":
                op.execute(f"CREATE TRIGGER {table}_generation_{event} AFTER {event.upper()} ON {table} "
                           f"BEGIN {_bump(generation)}; END")
            else:  # MariaDB / MySQL: row triggers only
                op.execute(f"CREATE TRIGGER {table}_generation_{event} AFTER {event.upper()} ON {table} "
                           f"FOR EACH ROW {_bump(generation)}")


def _drop_triggers(dialect, generation, tables):
    for table in tables:
        if dialect == "postgresql":
            op.execute(f"DROP TRIGGER IF EXISTS {table}_generation ON {table}")
            continue
        for event in EVENTS:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_generation_{event}")
    if dialect == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS bump_{generation}_generation()")


def upgrade() -> None:
    table = op.create_table('generations',
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('value', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('name'),
    **MYSQL
    )
    op.bulk_insert(table, [{'name': name, 'value': 0} for name in WATCHED])
    dialect = op.get_bind().dialect.name
    for generation, tables in WATCHED.items():
        _create_triggers(dialect, generation, tables)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for generation, tables in WATCHED.items():
        _drop_triggers(dialect, generation, tables)
    op.drop_table('generations')
