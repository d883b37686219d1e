"""Servers: instances with their flavor copy, metadata, tags, instance actions and events, faults.

Nova's cell-database shape where the API shows it, merged into one schema (one cell), soft-deleted
as Nova does it (``deleted`` = the row's id). Filterable and sortable strings compare by code point
on every engine, as in 0001.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql


def exact(length):
    # Compared and sorted by code point everywhere: collation "C" on PostgreSQL, utf8mb4_bin on MariaDB.
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}


def long_text():
    # MEDIUMTEXT on MariaDB (user_data, key_data, fault details, as in Nova), TEXT elsewhere.
    return sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('instances',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', exact(36), nullable=False),
    sa.Column('user_id', exact(255), nullable=True),
    sa.Column('project_id', exact(255), nullable=True),
    sa.Column('display_name', exact(255), nullable=True),
    sa.Column('display_description', exact(255), nullable=True),
    sa.Column('hostname', exact(255), nullable=True),
    sa.Column('image_ref', exact(255), nullable=True),
    sa.Column('kernel_id', exact(255), nullable=True),
    sa.Column('ramdisk_id', exact(255), nullable=True),
    sa.Column('launch_index', sa.Integer(), nullable=True),
    sa.Column('key_name', exact(255), nullable=True),
    sa.Column('key_data', long_text(), nullable=True),
    sa.Column('user_data', long_text(), nullable=True),
    sa.Column('power_state', sa.Integer(), nullable=True),
    sa.Column('vm_state', exact(255), nullable=True),
    sa.Column('task_state', exact(255), nullable=True),
    sa.Column('memory_mb', sa.Integer(), nullable=True),
    sa.Column('vcpus', sa.Integer(), nullable=True),
    sa.Column('root_gb', sa.Integer(), nullable=True),
    sa.Column('ephemeral_gb', sa.Integer(), nullable=True),
    sa.Column('instance_type_id', sa.Integer(), nullable=True),
    sa.Column('host', exact(255), nullable=True),
    sa.Column('node', exact(255), nullable=True),
    sa.Column('launched_on', sa.Text(), nullable=True),
    sa.Column('reservation_id', exact(255), nullable=True),
    sa.Column('launched_at', sa.DateTime(), nullable=True),
    sa.Column('terminated_at', sa.DateTime(), nullable=True),
    sa.Column('availability_zone', exact(255), nullable=True),
    sa.Column('locked', sa.Boolean(), nullable=False),
    sa.Column('locked_by', sa.String(length=5), nullable=True),
    sa.Column('locked_reason', sa.String(length=255), nullable=True),
    sa.Column('os_type', sa.String(length=255), nullable=True),
    sa.Column('architecture', sa.String(length=255), nullable=True),
    sa.Column('vm_mode', sa.String(length=255), nullable=True),
    sa.Column('root_device_name', sa.String(length=255), nullable=True),
    sa.Column('default_ephemeral_device', sa.String(length=255), nullable=True),
    sa.Column('default_swap_device', sa.String(length=255), nullable=True),
    sa.Column('config_drive', sa.String(length=255), nullable=True),
    sa.Column('access_ip_v4', sa.String(length=39), nullable=True),
    sa.Column('access_ip_v6', sa.String(length=39), nullable=True),
    sa.Column('auto_disk_config', sa.Boolean(), nullable=True),
    sa.Column('progress', sa.Integer(), nullable=True),
    sa.Column('shutdown_terminate', sa.Boolean(), nullable=True),
    sa.Column('disable_terminate', sa.Boolean(), nullable=True),
    sa.Column('cleaned', sa.Integer(), nullable=True),
    sa.Column('hidden', sa.Boolean(), nullable=True),
    sa.Column('pinned_availability_zone', exact(255), nullable=True),
    sa.Column('flavor', sa.Text(), nullable=True),
    sa.Column('network_info', sa.Text(), nullable=True),
    sa.Column('trusted_certs', sa.Text(), nullable=True),
    sa.Column('scheduler_hints', sa.Text(), nullable=True),
    sa.Column('namespace', sa.String(length=63), nullable=True),
    sa.Column('vm_name', sa.String(length=63), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instances')),
    sa.UniqueConstraint('uuid', name=op.f('uniq_instances0uuid')),
    **MYSQL,
    )
    op.create_index('instances_deleted_created_at_idx', 'instances', ['deleted', 'created_at'], unique=False)
    op.create_index('instances_host_node_deleted_idx', 'instances', ['host', 'node', 'deleted'], unique=False)
    op.create_index('instances_project_id_deleted_idx', 'instances', ['project_id', 'deleted'], unique=False)
    op.create_index('instances_reservation_id_idx', 'instances', ['reservation_id'], unique=False)
    op.create_index('instances_task_state_updated_at_idx', 'instances', ['task_state', 'updated_at'], unique=False)
    op.create_index('instances_terminated_at_launched_at_idx', 'instances', ['terminated_at', 'launched_at'], unique=False)
    op.create_index('instances_updated_at_project_id_idx', 'instances', ['updated_at', 'project_id'], unique=False)
    op.create_index('instances_uuid_deleted_idx', 'instances', ['uuid', 'deleted'], unique=False)
    op.create_table('tags',
    sa.Column('resource_id', exact(36), nullable=False),
    sa.Column('tag', exact(80), nullable=False),
    sa.PrimaryKeyConstraint('resource_id', 'tag', name=op.f('pk_tags')),
    **MYSQL,
    )
    op.create_index('tags_tag_idx', 'tags', ['tag'], unique=False)
    op.create_table('instance_actions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('action', sa.String(length=255), nullable=True),
    sa.Column('instance_uuid', exact(36), nullable=True),
    sa.Column('request_id', exact(255), nullable=True),
    sa.Column('user_id', sa.String(length=255), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=True),
    sa.Column('start_time', sa.DateTime(), nullable=True),
    sa.Column('finish_time', sa.DateTime(), nullable=True),
    sa.Column('message', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'], name=op.f('fk_instance_actions_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_actions')),
    **MYSQL,
    )
    op.create_index('instance_actions_instance_uuid_updated_at_idx', 'instance_actions', ['instance_uuid', 'updated_at'], unique=False)
    op.create_index('instance_uuid_idx', 'instance_actions', ['instance_uuid'], unique=False)
    op.create_index('request_id_idx', 'instance_actions', ['request_id'], unique=False)
    op.create_table('instance_faults',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=True),
    sa.Column('code', sa.Integer(), nullable=False),
    sa.Column('message', sa.String(length=255), nullable=True),
    sa.Column('details', long_text(), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'], name=op.f('fk_instance_faults_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_faults')),
    **MYSQL,
    )
    op.create_index('instance_faults_host_idx', 'instance_faults', ['host'], unique=False)
    op.create_index('instance_faults_instance_uuid_deleted_created_at_idx', 'instance_faults', ['instance_uuid', 'deleted', 'created_at'], unique=False)
    op.create_table('instance_metadata',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('key', exact(255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'], name=op.f('fk_instance_metadata_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_metadata')),
    sa.UniqueConstraint('instance_uuid', 'key', 'deleted', name=op.f('uniq_instance_metadata0instance_uuid_key_deleted')),
    **MYSQL,
    )
    op.create_table('instance_system_metadata',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('key', exact(255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'], name=op.f('fk_instance_system_metadata_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_system_metadata')),
    sa.UniqueConstraint('instance_uuid', 'key', 'deleted', name=op.f('uniq_instance_system_metadata0instance_uuid_key_deleted')),
    **MYSQL,
    )
    op.create_table('instance_actions_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('event', sa.String(length=255), nullable=True),
    sa.Column('action_id', sa.Integer(), nullable=True),
    sa.Column('start_time', sa.DateTime(), nullable=True),
    sa.Column('finish_time', sa.DateTime(), nullable=True),
    sa.Column('result', sa.String(length=255), nullable=True),
    sa.Column('traceback', sa.Text(), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('details', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['action_id'], ['instance_actions.id'], name=op.f('fk_instance_actions_events_action_id_instance_actions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_actions_events')),
    **MYSQL,
    )
    op.create_index('instance_actions_events_action_id_idx', 'instance_actions_events', ['action_id'], unique=False)


def downgrade() -> None:
    # Indexes go with their tables (MariaDB refuses to drop one a foreign key still uses).
    for table in ("instance_actions_events", "instance_system_metadata", "instance_metadata",
                  "instance_faults", "instance_actions", "tags", "instances"):
        op.drop_table(table)
