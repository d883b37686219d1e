"""Generations: a counter per cached collection, bumped in the transaction of every change to it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

MYSQL = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table('generations',
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('value', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('name'),
    **MYSQL
    )
    op.bulk_insert(table, [{'name': 'flavors', 'value': 0}])


def downgrade() -> None:
    op.drop_table('generations')
