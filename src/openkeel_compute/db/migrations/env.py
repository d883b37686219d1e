"""Alembic environment: runs on the connection ``db.migration`` hands over (no alembic.ini needed)."""

from alembic import context

from openkeel_compute.db.models import metadata

config = context.config
target_metadata = metadata


def run_migrations_online() -> None:
    connection = config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite can only change tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; run `openkeel-compute db sync`")
run_migrations_online()
