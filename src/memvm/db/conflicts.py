"""Turn expected unique violations into domain Conflicts (never a blanket IntegrityError map)."""

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.errors import Conflict


async def flush_or_conflict(session: AsyncSession, constraint: str, message: str) -> None:
    """Flush; if `constraint` is what failed, raise Conflict(message), else re-raise."""
    try:
        await session.flush()
    except IntegrityError as error:
        if getattr(error.orig, "constraint_name", None) == constraint or constraint in str(error.orig):
            raise Conflict(message) from error
        raise
