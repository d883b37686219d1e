"""The task log (Nova's task_log): runs of periodic tasks per compute host and period, first the
instance usage audit that os-instance_usage_audit_log reports.

Revision ID: 0008
Revises: 0007
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

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('task_log',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('task_name', sa.String(length=255), nullable=False),
    sa.Column('state', sa.String(length=255), nullable=False),
    sa.Column('host', exact(255), nullable=False),
    sa.Column('period_beginning', sa.DateTime(), nullable=False),
    sa.Column('period_ending', sa.DateTime(), nullable=False),
    sa.Column('message', sa.String(length=255), nullable=False),
    sa.Column('task_items', sa.Integer(), nullable=True),
    sa.Column('errors', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_log')),
    sa.UniqueConstraint('task_name', 'host', 'period_beginning', 'period_ending',
                        name='uniq_task_log0task_name0host0period_beginning0period_ending'),
    **MYSQL,
    )
    op.create_index('ix_task_log_period_beginning', 'task_log', ['period_beginning'], unique=False)
    op.create_index('ix_task_log_host', 'task_log', ['host'], unique=False)
    op.create_index('ix_task_log_period_ending', 'task_log', ['period_ending'], unique=False)


def downgrade() -> None:
    op.drop_table('task_log')
