"""SQLAlchemy models: the flavor catalogue (Nova's API-database shape) and the controller outbox.

Uniqueness lives in the database (flavor id, name, one access row and one extra-spec row per key),
so concurrent API workers can never store duplicates; the catalogue maps an IntegrityError to
Nova's 409.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uniq_%(table_name)s0%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# MariaDB/MySQL: utf8mb4 with a binary collation, so ids, names and keys compare exactly as on
# SQLite and PostgreSQL ("m1.Small" and "m1.small" are two flavors on every engine).
MYSQL_TABLE_ARGS = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}


def ExactString(length: int):
    """A string compared and sorted by code point on every engine (PostgreSQL: collation "C")."""
    return String(length).with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Flavor(Base):
    __tablename__ = "flavors"
    __table_args__ = (
        UniqueConstraint("flavorid"),
        UniqueConstraint("name"),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    flavorid: Mapped[str] = mapped_column(ExactString(255), nullable=False)
    name: Mapped[str] = mapped_column(ExactString(255), nullable=False)
    memory_mb: Mapped[int] = mapped_column(Integer, nullable=False)
    vcpus: Mapped[int] = mapped_column(Integer, nullable=False)
    root_gb: Mapped[int] = mapped_column(Integer, nullable=False)
    ephemeral_gb: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    swap: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    rxtx_factor: Mapped[float] = mapped_column(Float, nullable=False, default=1.0)
    vcpu_weight: Mapped[int | None] = mapped_column(Integer, nullable=True)
    disabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    is_public: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    updated_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class FlavorExtraSpec(Base):
    __tablename__ = "flavor_extra_specs"
    __table_args__ = (
        UniqueConstraint("flavor_id", "key"),
        Index("flavor_extra_specs_flavor_id_key_idx", "flavor_id", "key"),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    flavor_id: Mapped[int] = mapped_column(ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False)
    key: Mapped[str] = mapped_column(ExactString(255), nullable=False)
    value: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    updated_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class FlavorProject(Base):
    __tablename__ = "flavor_projects"
    __table_args__ = (UniqueConstraint("flavor_id", "project_id"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    flavor_id: Mapped[int] = mapped_column(ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False)
    project_id: Mapped[str] = mapped_column(ExactString(255), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    updated_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class Outbox(Base):
    """What the controller must apply, written in the same transaction as the catalogue change.

    ``id`` orders the rows; the controller applies them in that order and sets ``done_at`` only
    after the cluster accepted the change.
    """

    __tablename__ = "outbox"
    __table_args__ = (Index("outbox_pending_idx", "done_at", "id"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)  # "flavor"
    object_id: Mapped[str] = mapped_column(String(255), nullable=False)  # the flavor id (flavorid)
    operation: Mapped[str] = mapped_column(String(32), nullable=False)  # "upsert" | "delete"
    payload: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    done_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
