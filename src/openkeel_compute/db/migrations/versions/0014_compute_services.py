"""Compute services: one nova-compute service per cluster node (os-services, os-hypervisors, os-hosts);
server groups and their members (os-server-groups); host aggregates, their hosts and metadata
(os-aggregates).

The controller creates a row per node and keeps its heartbeat (``last_seen_up``) and capacity; the API
writes disabled / disabled_reason / forced_down, and ``cordon_pending`` until the controller has cordoned
or uncordoned the node to match. Ids are never reused (SQLite AUTOINCREMENT), as a service's id is what
clients before 2.53 address it by.

Revision ID: 0014
Revises: 0011
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

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('compute_services',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', exact(36), nullable=False),
    sa.Column('host', exact(255), nullable=False),
    sa.Column('binary', exact(255), nullable=False),
    sa.Column('disabled', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('disabled_reason', sa.String(length=255), nullable=True),
    sa.Column('forced_down', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('cordon_pending', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('last_seen_up', sa.DateTime(), nullable=True),
    sa.Column('vcpus', sa.Integer(), nullable=False),
    sa.Column('memory_mb', sa.Integer(), nullable=False),
    sa.Column('local_gb', sa.Integer(), nullable=False),
    sa.Column('host_ip', sa.String(length=64), nullable=True),
    sa.Column('hypervisor_version', sa.Integer(), nullable=False),
    sa.Column('node_uuid', exact(36), nullable=True),
    sa.Column('cpu_info', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compute_services')),
    sa.UniqueConstraint('uuid', name='uniq_compute_services0uuid'),
    sa.UniqueConstraint('host', 'binary', name='uniq_compute_services0host_binary'),
    sqlite_autoincrement=True,
    **MYSQL,
    )
    op.create_table('server_groups',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', exact(36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('project_id', exact(255), nullable=False),
    sa.Column('user_id', exact(255), nullable=False),
    sa.Column('policy', sa.String(length=255), nullable=False),
    sa.Column('rules', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_server_groups')),
    sa.UniqueConstraint('uuid', name='uniq_server_groups0uuid'),
    sqlite_autoincrement=True,
    **MYSQL,
    )
    op.create_index('server_groups_project_id_idx', 'server_groups', ['project_id'])
    op.create_table('server_group_members',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('group_id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['group_id'], ['server_groups.id'], ondelete='CASCADE',
                            name=op.f('fk_server_group_members_group_id_server_groups')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_server_group_members')),
    sa.UniqueConstraint('group_id', 'instance_uuid', name='uniq_server_group_members0group_id_instance_uuid'),
    sqlite_autoincrement=True,
    **MYSQL,
    )
    op.create_index('server_group_members_instance_uuid_idx', 'server_group_members', ['instance_uuid'])
    op.create_table('aggregates',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', exact(36), nullable=False),
    sa.Column('name', exact(255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_aggregates')),
    sa.UniqueConstraint('uuid', name='uniq_aggregates0uuid'),
    sa.UniqueConstraint('name', name='uniq_aggregates0name'),
    sqlite_autoincrement=True,
    **MYSQL,
    )
    for table, column, length in (('aggregate_hosts', 'host', 255), ('aggregate_metadata', 'key', 255)):
        columns = [sa.Column(column, exact(length), nullable=False)]
        if table == 'aggregate_metadata':
            columns.append(sa.Column('value', sa.String(length=255), nullable=False))
        unique = ('host', 'aggregate_id') if table == 'aggregate_hosts' else ('aggregate_id', 'key')
        op.create_table(table,
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('aggregate_id', sa.Integer(), nullable=False),
        *columns,
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['aggregate_id'], ['aggregates.id'], ondelete='CASCADE',
                                name=op.f(f'fk_{table}_aggregate_id_aggregates')),
        sa.PrimaryKeyConstraint('id', name=op.f(f'pk_{table}')),
        sa.UniqueConstraint(*unique, name=f'uniq_{table}0{"_".join(unique)}'),
        sqlite_autoincrement=True,
        **MYSQL,
        )


def downgrade() -> None:
    op.drop_table('aggregate_metadata')
    op.drop_table('aggregate_hosts')
    op.drop_table('aggregates')
    op.drop_table('server_group_members')
    op.drop_table('server_groups')
    op.drop_table('compute_services')
