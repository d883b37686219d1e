"""SQLAlchemy Core tables: the flavor catalogue (Nova's API-database shape) and the controller outbox.

Uniqueness lives in the database (flavor id, name, one access row and one extra-spec row per key),
so concurrent API workers can never store duplicates; the catalogue maps an IntegrityError to
Nova's 409.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# Core tables only: the API and the controller run Core statements, so sqlalchemy.orm (several
# MiB per worker and tens of milliseconds of start-up) is never imported.

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uniq_%(table_name)s0%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# Ids, names and keys compare and sort by code point on every engine ("m1.Small" and "m1.small"
# are two flavors everywhere): collation "C" on PostgreSQL, and on MariaDB/MySQL utf8mb4 with the
# utf8mb4_bin collation, which the migrations give every table (table options are the
# migrations' business; keeping them out of these definitions spares every process the MySQL
# dialect import).


def ExactString(length: int):
    """A string compared and sorted by code point on every engine (PostgreSQL: collation "C")."""
    return String(length).with_variant(String(length, collation="C"), "postgresql")


metadata = MetaData(naming_convention=NAMING)


def _timestamps() -> list[Column]:
    return [
        Column("created_at", DateTime, nullable=False, default=utcnow),
        Column("updated_at", DateTime, nullable=True),
    ]


FLAVORS = Table(
    "flavors",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavorid", ExactString(255), nullable=False),
    Column("name", ExactString(255), nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("vcpus", Integer, nullable=False),
    Column("root_gb", Integer, nullable=False),
    Column("ephemeral_gb", Integer, nullable=False, default=0),
    Column("swap", Integer, nullable=False, default=0),
    Column("rxtx_factor", Float, nullable=False, default=1.0),
    Column("vcpu_weight", Integer, nullable=True),
    Column("disabled", Boolean, nullable=False, default=False),
    Column("is_public", Boolean, nullable=False, default=True),
    Column("description", Text, nullable=True),
    *_timestamps(),
    UniqueConstraint("flavorid"),
    UniqueConstraint("name"),
)

FLAVOR_EXTRA_SPECS = Table(
    "flavor_extra_specs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavor_id", Integer, ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False),
    Column("key", ExactString(255), nullable=False),
    Column("value", String(255), nullable=True),
    *_timestamps(),
    UniqueConstraint("flavor_id", "key"),
    Index("flavor_extra_specs_flavor_id_key_idx", "flavor_id", "key"),
)

FLAVOR_PROJECTS = Table(
    "flavor_projects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavor_id", Integer, ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False),
    Column("project_id", ExactString(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("flavor_id", "project_id"),
)

# What the controller must apply, written in the same transaction as the catalogue change. ``id``
# orders the rows; the controller applies them in that order and sets ``done_at`` only after the
# cluster accepted the change.
OUTBOX = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime, nullable=False, default=utcnow),
    Column("kind", String(32), nullable=False),  # "flavor"
    Column("object_id", String(255), nullable=False),  # the flavor id (flavorid)
    Column("operation", String(32), nullable=False),  # "upsert" | "delete"
    Column("payload", JSON, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text, nullable=True),
    Column("done_at", DateTime, nullable=True),
    Index("outbox_pending_idx", "done_at", "id"),
)
