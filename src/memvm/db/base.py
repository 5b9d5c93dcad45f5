"""Declarative base with a constraint naming convention (stable names for migrations)."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, cast

from sqlalchemy import Constraint, DateTime, ForeignKey, ForeignKeyConstraint, MetaData, Table, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# What Citus distributes every tenant table by (docs/scale-out.md).
TENANT_KEY: Final = "organization_id"


def _key_column_name(constraint: Constraint, table: Table) -> str:
    """The first column of a foreign key after organization_id: a key between tenant tables keeps the
    name it had before organization_id joined it."""
    names = [str(column.name) for column in cast(ForeignKeyConstraint, constraint).columns]
    return next((name for name in names if name != TENANT_KEY), names[0])


NAMING_CONVENTION: dict[str, Any] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "key_column_name": _key_column_name,
    "fk": "fk_%(table_name)s_%(key_column_name)s_%(referred_table_name)s",
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
    their organization and stamp it on new rows (db/tenancy.py), so no code path can forget.

    organization_id leads the table's primary key (and every unique key and foreign key between
    these tables), so Citus can keep each organization's rows in co-located shards. It leads the
    mapper's key too: the ORM refreshes a row and loads its deferred columns by that key (and writes
    rows back by the table's), so each is found by (organization_id, id) in one index descent, not
    one per organization. Look a row up with `owned(session, Agent, agent_id)` (db/tenancy.py).
    """

    organization_id: Mapped[str] = mapped_column(ForeignKey("organization.id"), primary_key=True, sort_order=-1)


def tenant_foreign_key(
    columns: str | Sequence[str], referred_table: str, referred_columns: Sequence[str] = ("id",), **options: Any
) -> ForeignKeyConstraint:
    """A foreign key between tenant tables: organization_id first on both sides, so the two rows are
    of one organization and, under Citus, in co-located shards."""
    own = [columns] if isinstance(columns, str) else list(columns)
    referred = [f"{referred_table}.{column}" for column in (TENANT_KEY, *referred_columns)]
    return ForeignKeyConstraint([TENANT_KEY, *own], referred, **options)


class SharedOrTenantOwned:
    """Like TenantOwned, except that a row with no organization is shared: every organization can
    read it (the built-in tools)."""

    organization_id: Mapped[str | None] = mapped_column(ForeignKey("organization.id"))
