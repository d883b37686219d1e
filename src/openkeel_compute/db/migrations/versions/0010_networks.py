"""Networks through Neutron: the networks and ports each server was booted with
(instance_network_requests) and the external events accepted for the controller
(instance_external_events).

Revision ID: 0010
Revises: 0009
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

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('instance_network_requests',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('network_id', exact(36), nullable=True),
    sa.Column('port_id', exact(36), nullable=True),
    sa.Column('fixed_ip', sa.String(length=39), nullable=True),
    sa.Column('tag', sa.String(length=60), nullable=True),
    sa.Column('port_created', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'],
                            name=op.f('fk_instance_network_requests_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_network_requests')),
    sa.UniqueConstraint('instance_uuid', 'position', 'deleted', name='uniq_instance_network_requests0position'),
    **MYSQL,
    )
    op.create_table('instance_external_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('tag', sa.String(length=255), nullable=True),
    sa.Column('host', exact(255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('handled_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_external_events')),
    **MYSQL,
    )
    op.create_index('ix_instance_external_events_instance_uuid', 'instance_external_events', ['instance_uuid'],
                    unique=False)
    op.create_index('ix_instance_external_events_handled_at', 'instance_external_events', ['handled_at'],
                    unique=False)


def downgrade() -> None:
    op.drop_table('instance_external_events')
    op.drop_table('instance_network_requests')
