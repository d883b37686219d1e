"""Compute services: one nova-compute service per cluster node (os-services, os-hypervisors, os-hosts).

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


def downgrade() -> None:
    op.drop_table('compute_services')
