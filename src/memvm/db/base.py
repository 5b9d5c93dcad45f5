"""Declarative base with a constraint naming convention (stable names for migrations)."""

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, MetaData, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Timestamps:
    # Server-set columns come back through RETURNING, so they can be read without a refresh.
    __mapper_args__ = {"eager_defaults": True}

    # clock_timestamp, not now(): rows made in one transaction still get distinct, ordered times.
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.clock_timestamp(), onupdate=func.clock_timestamp()
    )


class TenantOwned:
    """A row that belongs to one organization. Sessions scope every ORM query of these tables to
    their organization and stamp it on new rows (db/tenancy.py), so no code path can forget."""

    organization_id: Mapped[str] = mapped_column(ForeignKey("organization.id"))


class SharedOrTenantOwned:
    """Like TenantOwned, except that a row with no organization is shared: every organization can
    read it (the built-in tools)."""

    organization_id: Mapped[str | None] = mapped_column(ForeignKey("organization.id"))
