"""Remote console authorisations (Nova's console_auth_tokens): one row per console URL handed out,
holding the token's SHA-256, never the token.

Revision ID: 0015
Revises: 0011
Create Date: 2026-12-05
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

MYSQL: dict[str, Any] = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def exact(length):
    # Compared and sorted by code point everywhere: collation "C" on PostgreSQL, utf8mb4_bin on MariaDB.
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table('console_auth_tokens',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('token_hash', sa.String(length=255), nullable=False),
    sa.Column('console_type', sa.String(length=255), nullable=False),
    sa.Column('host', exact(255), nullable=False),
    sa.Column('port', sa.Integer(), nullable=True),
    sa.Column('tls_port', sa.Integer(), nullable=True),
    sa.Column('internal_access_path', sa.String(length=255), nullable=True),
    sa.Column('instance_uuid', exact(36), nullable=False),
    sa.Column('access_url_base', sa.Text(), nullable=True),
    sa.Column('expires', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'],
                            name=op.f('fk_console_auth_tokens_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_console_auth_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uniq_console_auth_tokens0token_hash')),
    **MYSQL,
    )
    op.create_index('console_auth_tokens_instance_uuid_idx', 'console_auth_tokens', ['instance_uuid'], unique=False)
    op.create_index('console_auth_tokens_host_expires_idx', 'console_auth_tokens', ['host', 'expires'],
                    unique=False)


def downgrade() -> None:
    # (its indexes go with it; MariaDB refuses to drop the one its foreign key uses on its own)
    op.drop_table('console_auth_tokens')
