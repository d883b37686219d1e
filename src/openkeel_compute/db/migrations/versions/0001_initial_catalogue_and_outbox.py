"""Initial schema: the flavor catalogue (Nova's API-database shape) and the controller outbox.

Revision ID: 0001
Revises: 
Create Date: 2026-11-29
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


def exact(length):
    # Compared and sorted by code point everywhere: collation "C" on PostgreSQL, utf8mb4_bin on MariaDB.
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('flavors',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('flavorid', exact(255), nullable=False),
    sa.Column('name', exact(255), nullable=False),
    sa.Column('memory_mb', sa.Integer(), nullable=False),
    sa.Column('vcpus', sa.Integer(), nullable=False),
    sa.Column('root_gb', sa.Integer(), nullable=False),
    sa.Column('ephemeral_gb', sa.Integer(), nullable=False),
    sa.Column('swap', sa.Integer(), nullable=False),
    sa.Column('rxtx_factor', sa.Float(), nullable=False),
    sa.Column('vcpu_weight', sa.Integer(), nullable=True),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('is_public', sa.Boolean(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavors')),
    sa.UniqueConstraint('flavorid', name=op.f('uniq_flavors0flavorid')),
    sa.UniqueConstraint('name', name=op.f('uniq_flavors0name')),
    **MYSQL,
    )
    op.create_table('outbox',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('object_id', sa.String(length=255), nullable=False),
    sa.Column('operation', sa.String(length=32), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('done_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_outbox')),
    **MYSQL,
    )
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.create_index('outbox_pending_idx', ['done_at', 'id'], unique=False)

    op.create_table('flavor_extra_specs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('flavor_id', sa.Integer(), nullable=False),
    sa.Column('key', exact(255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'], name=op.f('fk_flavor_extra_specs_flavor_id_flavors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavor_extra_specs')),
    sa.UniqueConstraint('flavor_id', 'key', name=op.f('uniq_flavor_extra_specs0flavor_id_key')),
    **MYSQL,
    )
    with op.batch_alter_table('flavor_extra_specs', schema=None) as batch_op:
        batch_op.create_index('flavor_extra_specs_flavor_id_key_idx', ['flavor_id', 'key'], unique=False)

    op.create_table('flavor_projects',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('flavor_id', sa.Integer(), nullable=False),
    sa.Column('project_id', exact(255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'], name=op.f('fk_flavor_projects_flavor_id_flavors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavor_projects')),
    sa.UniqueConstraint('flavor_id', 'project_id', name=op.f('uniq_flavor_projects0flavor_id_project_id')),
    **MYSQL,
    )


def downgrade() -> None:
    op.drop_table('flavor_projects')
    with op.batch_alter_table('flavor_extra_specs', schema=None) as batch_op:
        batch_op.drop_index('flavor_extra_specs_flavor_id_key_idx')

    op.drop_table('flavor_extra_specs')
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_index('outbox_pending_idx')

    op.drop_table('outbox')
    op.drop_table('flavors')
