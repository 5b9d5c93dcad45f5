"""Helpers for data-changing statements: how many rows one touched, and rows sent as one JSON parameter."""

from collections.abc import Iterable
from typing import Any, cast

from sqlalchemy import Column, CursorResult, Executable, bindparam, column, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.expression import ColumnElement, TableValuedAlias


async def rows_affected(session: AsyncSession, statement: Executable) -> int:
    # DML returns a CursorResult (which has rowcount); session.execute is typed for any statement.
    result = cast(CursorResult[Any], await session.execute(statement))
    return result.rowcount


def json_rows(columns: Iterable[ColumnElement[Any]], parameter: str) -> TableValuedAlias:
    """The rows of a JSON array parameter (objects by column name) as a table of `columns`. A statement
    built once with its rows as one parameter has a cache key; one with a VALUES row per row has none, so
    SQLAlchemy would compile it on every call."""
    table = func.jsonb_to_recordset(bindparam(parameter, type_=JSONB)).table_valued(*(column(c.name, c.type) for c in columns))
    return table.render_derived(with_types=True)


def row_of(instance: Any, columns: Iterable[Column[Any]]) -> dict[str, Any]:
    """A new ORM object's values of `columns` by column name, as a JSON row for json_rows, with the
    column defaults a flush would have applied."""
    row = {}
    for c in columns:
        value = getattr(instance, c.key)
        if value is None and c.default is not None and c.default.is_scalar:
            value = c.default.arg  # type: ignore[attr-defined]
        row[c.name] = value
    return row
