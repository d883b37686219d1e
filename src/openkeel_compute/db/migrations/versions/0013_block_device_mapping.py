"""Volumes through Cinder: the block devices of each server (block_device_mapping, as Nova's table).

Revision ID: 0013
Revises: 0011
Create Date: 2026-12-05
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql


def exact(length):
    # Compared and sorted by code point everywhere: collation "C" on PostgreSQL, utf8mb4_bin on MariaDB.
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


def long_text():
    return sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}

revision = '0013'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('block_device_mapping',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', exact(36), nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('source_type', sa.String(length=255), nullable=True),
    sa.Column('destination_type', sa.String(length=255), nullable=True),
    sa.Column('guest_format', sa.String(length=255), nullable=True),
    sa.Column('device_type', sa.String(length=255), nullable=True),
    sa.Column('disk_bus', sa.String(length=255), nullable=True),
    sa.Column('boot_index', sa.Integer(), nullable=True),
    sa.Column('device_name', sa.String(length=255), nullable=True),
    sa.Column('delete_on_termination', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('snapshot_id', exact(36), nullable=True),
    sa.Column('volume_id', exact(36), nullable=True),
    sa.Column('volume_size', sa.Integer(), nullable=True),
    sa.Column('image_id', exact(36), nullable=True),
    sa.Column('no_device', sa.Boolean(), nullable=True),
    sa.Column('connection_info', long_text(), nullable=True),
    sa.Column('tag', sa.String(length=255), nullable=True),
    sa.Column('attachment_id', exact(36), nullable=True),
    sa.Column('volume_type', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'],
                            name=op.f('fk_block_device_mapping_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_block_device_mapping')),
    sa.UniqueConstraint('uuid', name='uniq_block_device_mapping0uuid'),
    sqlite_autoincrement=True,
    **MYSQL,
    )
    op.create_index('block_device_mapping_instance_uuid_idx', 'block_device_mapping', ['instance_uuid'],
                    unique=False)
    op.create_index('block_device_mapping_instance_uuid_volume_id_idx', 'block_device_mapping',
                    ['instance_uuid', 'volume_id'], unique=False)


def downgrade() -> None:
    op.drop_table('block_device_mapping')
