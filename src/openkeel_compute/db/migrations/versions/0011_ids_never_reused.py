"""Internal ids are never handed out twice on SQLite: the tables whose integer ids outlive their rows
become AUTOINCREMENT tables.

SQLite gave a new row max(id) + 1, so the flavor created after the one with the highest id was deleted
took the deleted flavor's id, which the servers' frozen flavor copies still name (a resize to the new
flavor answered "When resizing, instances must change flavor!"); likewise for the ids the API shows
(key pairs, migrations, servers through their instance name) or other rows copy (instance action events,
the outbox's order). SQLite can give a table AUTOINCREMENT only by rebuilding it: the rows are copied,
and each table's sequence starts past the highest id it holds or any other row names (a deleted flavor
a server or a migration still names). PostgreSQL and MariaDB never reuse a sequence's values: nothing to
do there.

The rebuild runs with SQLite's foreign keys off (db/migration.py turns them off around every migration
run): with them on, dropping the old flavors table would delete the flavors' extra specs and projects.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

# table -> the ids other rows name, beside the table's own
NAMED_ELSEWHERE = {
    "flavors": (
        "SELECT max(instance_type_id) FROM instances",
        "SELECT max(old_instance_type_id) FROM migrations",
        "SELECT max(new_instance_type_id) FROM migrations",
        *(f"SELECT max(CAST(json_extract(flavor, '$.{which}.\"nova_object.data\".id') AS INTEGER))"
          " FROM instances WHERE json_valid(flavor)" for which in ("cur", "old", "new")),
    ),
    "instances": (),
    "key_pairs": (),
    "migrations": (),
    "instance_actions": ("SELECT max(action_id) FROM instance_actions_events",),
    "instance_actions_events": (),
    "outbox": (),
}
# the triggers of migration 0005 on the flavors table, which its rebuild drops
FLAVOR_TRIGGERS = ("insert", "update", "delete")


def _highest(bind, table: str) -> int:
    found = [bind.exec_driver_sql(f"SELECT max(id) FROM {table}").scalar()]
    found += [bind.exec_driver_sql(query).scalar() for query in NAMED_ELSEWHERE[table]]
    return max([int(value) for value in found if value is not None], default=0)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    if bind.exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("migration 0011 rebuilds tables and needs SQLite's foreign keys off "
                           "(run it with `openkeel-compute db sync`)")
    for table in NAMED_ELSEWHERE:
        highest = _highest(bind, table)
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}):
            pass
        # the copy set the sequence to the highest id copied; a deleted row's id named elsewhere is higher
        bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :table"), {"table": table})
        if highest:
            bind.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:table, :seq)"),
                         {"table": table, "seq": highest})
    for event in FLAVOR_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS flavors_generation_{event}")
        op.execute(f"CREATE TRIGGER flavors_generation_{event} AFTER {event.upper()} ON flavors "
                   "BEGIN UPDATE generations SET value = value + 1 WHERE name = 'flavors'; END")


def downgrade() -> None:
    # AUTOINCREMENT tables serve the older revisions as well: nothing to undo.
    pass
