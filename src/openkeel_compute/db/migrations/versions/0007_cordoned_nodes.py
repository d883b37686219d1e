"""Cordoned nodes: node_zones.cordoned is a node's spec.unschedulable as the controller publishes it.

A cordoned node is what a disabled compute service is in Nova: its servers show host_status
MAINTENANCE, and it counts for no availability zone.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('node_zones', sa.Column('cordoned', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('node_zones') as batch:
        batch.drop_column('cordoned')
