"""Running UPDATE and DELETE statements where the caller needs to know how many rows they touched."""

from typing import Any, cast

from sqlalchemy import CursorResult, Executable
from sqlalchemy.ext.asyncio import AsyncSession


async def rows_affected(session: AsyncSession, statement: Executable) -> int:
    # DML returns a CursorResult (which has rowcount); session.execute is typed for any statement.
    result = cast(CursorResult[Any], await session.execute(statement))
    return result.rowcount
