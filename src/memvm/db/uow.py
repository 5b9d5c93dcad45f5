"""The only code that commits or rolls back: one unit of work = one transaction."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.db import tenancy


@asynccontextmanager
async def transaction(sessionmaker: async_sessionmaker[AsyncSession], organization_id: str) -> AsyncIterator[AsyncSession]:
    """One transaction in one organization (every query is scoped to it, db/tenancy.py). Commits if
    the block finishes, rolls back on any exception — cancellation included."""
    async with sessionmaker() as session:
        tenancy.scope(session.sync_session, organization_id)
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()
