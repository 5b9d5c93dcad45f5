"""Turn expected unique violations into domain Conflicts (never a blanket IntegrityError map)."""

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.errors import Conflict


@contextmanager
def conflict_on(constraint: str, message: str) -> Iterator[None]:
    """If `constraint` is what a statement inside failed on, raise Conflict(message), else re-raise."""
    try:
        yield
    except IntegrityError as error:
        if getattr(error.orig, "constraint_name", None) == constraint or constraint in str(error.orig):
            raise Conflict(message) from error
        raise


async def flush_or_conflict(session: AsyncSession, constraint: str, message: str) -> None:
    """Flush; a violation of `constraint` is Conflict(message)."""
    with conflict_on(constraint, message):
        await session.flush()
