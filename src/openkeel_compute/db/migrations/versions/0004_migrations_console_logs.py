"""Migrations (resize records, Nova's shape) and the console logs the controller reads for the API.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql


def exact(length):
    # Compared and sorted by code point everywhere: collation "C" on PostgreSQL, utf8mb4_bin on MariaDB.
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


def long_text():
    # MEDIUMTEXT on MariaDB (a console log can pass TEXT's 64 KiB), TEXT elsewhere.
    return sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('migrations',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', exact(36), nullable=True),
    sa.Column('source_compute', sa.String(length=255), nullable=True),
    sa.Column('dest_compute', sa.String(length=255), nullable=True),
    sa.Column('source_node', sa.String(length=255), nullable=True),
    sa.Column('dest_node', sa.String(length=255), nullable=True),
    sa.Column('dest_host', sa.String(length=255), nullable=True),
    sa.Column('old_instance_type_id', sa.Integer(), nullable=True),
    sa.Column('new_instance_type_id', sa.Integer(), nullable=True),
    sa.Column('instance_uuid', exact(36), nullable=True),
    sa.Column('migration_type', sa.String(length=16), nullable=True),
    sa.Column('hidden', sa.Boolean(), nullable=True),
    sa.Column('memory_total', sa.BigInteger(), nullable=True),
    sa.Column('memory_processed', sa.BigInteger(), nullable=True),
    sa.Column('memory_remaining', sa.BigInteger(), nullable=True),
    sa.Column('disk_total', sa.BigInteger(), nullable=True),
    sa.Column('disk_processed', sa.BigInteger(), nullable=True),
    sa.Column('disk_remaining', sa.BigInteger(), nullable=True),
    sa.Column('status', sa.String(length=255), nullable=True),
    sa.Column('cross_cell_move', sa.Boolean(), nullable=True),
    sa.Column('user_id', exact(255), nullable=True),
    sa.Column('project_id', exact(255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'],
                            name=op.f('fk_migrations_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_migrations')),
    sa.UniqueConstraint('uuid', name=op.f('uniq_migrations0uuid')),
    **MYSQL,
    )
    op.create_index('migrations_instance_uuid_and_status_idx', 'migrations',
                    ['deleted', 'instance_uuid', 'status'], unique=False)
    op.create_index('migrations_updated_at_idx', 'migrations', ['updated_at'], unique=False)
    op.create_table('console_logs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('requested_at', sa.DateTime(), nullable=True),
    sa.Column('length', sa.Integer(), nullable=True),
    sa.Column('answered_at', sa.DateTime(), nullable=True),
    sa.Column('output', long_text(), nullable=True),
    sa.Column('error', sa.String(length=255), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_console_logs')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uniq_console_logs0instance_uuid')),
    **MYSQL,
    )


def downgrade() -> None:
    op.drop_table('console_logs')
    op.drop_index('migrations_updated_at_idx', table_name='migrations')
    op.drop_index('migrations_instance_uuid_and_status_idx', table_name='migrations')
    op.drop_table('migrations')
