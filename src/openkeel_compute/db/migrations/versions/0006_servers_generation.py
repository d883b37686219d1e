"""The servers generation: the counter the API's kept server lists are checked against.

No trigger raises it. Every transaction that wrote one of the tables the server lists read
raises it itself, as the last statement before its COMMIT (db/generations.py): a transaction
that holds the counter's row lock does nothing but commit, so the lock can never be part of a
wait cycle, however many server rows the transaction changed before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("INSERT INTO generations (name, value) VALUES ('servers', 0)")


def downgrade() -> None:
    op.execute("DELETE FROM generations WHERE name = 'servers'")
