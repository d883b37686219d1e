"""Key pairs, quotas (project, per user, per class) and the zones of the cluster's nodes.

key_pairs, quotas, project_user_quotas and quota_classes have the shapes of Nova's API database
(no soft delete there either). node_zones is where the controller publishes each Kubernetes node's
``topology.kubernetes.io/zone`` label, so the API (which never calls the cluster) can list
availability zones.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


def exact(length):
    # Compared and sorted by code point everywhere: collation "C" on PostgreSQL, utf8mb4_bin on MariaDB.
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('key_pairs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', exact(255), nullable=False),
    sa.Column('user_id', exact(255), nullable=False),
    sa.Column('fingerprint', sa.String(length=255), nullable=True),
    sa.Column('public_key', sa.Text(), nullable=True),
    sa.Column('type', sa.String(length=4), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_key_pairs')),
    sa.UniqueConstraint('user_id', 'name', name=op.f('uniq_key_pairs0user_id_name')),
    **MYSQL,
    )
    op.create_table('quotas',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('project_id', exact(255), nullable=False),
    sa.Column('resource', exact(255), nullable=False),
    sa.Column('hard_limit', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_quotas')),
    sa.UniqueConstraint('project_id', 'resource', name=op.f('uniq_quotas0project_id_resource')),
    **MYSQL,
    )
    op.create_table('project_user_quotas',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('project_id', exact(255), nullable=False),
    sa.Column('user_id', exact(255), nullable=False),
    sa.Column('resource', exact(255), nullable=False),
    sa.Column('hard_limit', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_project_user_quotas')),
    sa.UniqueConstraint('user_id', 'project_id', 'resource',
                        name=op.f('uniq_project_user_quotas0user_id_project_id_resource')),
    **MYSQL,
    )
    op.create_index('project_user_quotas_project_id_idx', 'project_user_quotas', ['project_id'], unique=False)
    op.create_table('quota_classes',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('class_name', exact(255), nullable=False),
    sa.Column('resource', exact(255), nullable=False),
    sa.Column('hard_limit', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_quota_classes')),
    sa.UniqueConstraint('class_name', 'resource', name=op.f('uniq_quota_classes0class_name_resource')),
    **MYSQL,
    )
    op.create_table('node_zones',
    sa.Column('node', exact(255), nullable=False),
    sa.Column('zone', exact(255), nullable=True),
    sa.Column('available', sa.Boolean(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('node', name=op.f('pk_node_zones')),
    **MYSQL,
    )


def downgrade() -> None:
    for table in ("node_zones", "quota_classes", "project_user_quotas", "quotas", "key_pairs"):
        op.drop_table(table)
