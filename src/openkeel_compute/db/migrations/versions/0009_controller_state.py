"""The controller's working state of a server (instance_controller_state): values of any length, which
system metadata's 255 characters refused on PostgreSQL and MariaDB (a resize's matchers and revisions,
the nodes a build was tried on). The items kept in system metadata so far move here.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


def exact(length):
    # Compared and sorted by code point everywhere: collation "C" on PostgreSQL, utf8mb4_bin on MariaDB.
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}
KEYS = ("openkeel_tried_nodes", "openkeel_resize_from", "openkeel_resize_nodes")

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    state = op.create_table('instance_controller_state',
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('key', exact(255), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'],
                            name=op.f('fk_instance_controller_state_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('instance_uuid', 'key', name=op.f('pk_instance_controller_state')),
    **MYSQL,
    )
    sysmeta = sa.table('instance_system_metadata', sa.column('instance_uuid'), sa.column('key'),
                       sa.column('value'), sa.column('created_at'), sa.column('updated_at'), sa.column('deleted'))
    live = sa.and_(sysmeta.c.key.in_(KEYS), sysmeta.c.deleted == 0, sysmeta.c.value.is_not(None))
    if op.get_bind().execute(sa.select(sysmeta.c.key).where(sysmeta.c.key.in_(KEYS)).limit(1)).first() is None:
        return  # nothing to move (a new database): no write, which would count as a change of the servers
    op.execute(state.insert().from_select(
        ['instance_uuid', 'key', 'value', 'created_at', 'updated_at'],
        sa.select(sysmeta.c.instance_uuid, sysmeta.c.key, sysmeta.c.value, sysmeta.c.created_at,
                  sysmeta.c.updated_at).where(live)))
    op.execute(sysmeta.delete().where(sysmeta.c.key.in_(KEYS)))


def downgrade() -> None:
    op.drop_table('instance_controller_state')
