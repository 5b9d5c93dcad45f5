"""The only code that commits or rolls back: one unit of work = one transaction, or, for a unit that
only reads, no transaction at all (`reading`)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import ORMExecuteState, Session

from memvm.db import tenancy

_READ_ONLY = "memvm.read_only"


class WriteWhileReading(RuntimeError):
    """A unit of work opened with `reading` tried to write or lock rows (a bug in memvm: that work
    needs `transaction`)."""


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


@asynccontextmanager
async def reading(sessionmaker: async_sessionmaker[AsyncSession], organization_id: str) -> AsyncIterator[AsyncSession]:
    """Reads in one organization (scoped as in `transaction`), each statement on its own: no BEGIN
    and no COMMIT, two round trips fewer than a transaction. Under READ COMMITTED (PostgreSQL's
    default, which memvm keeps) every statement of a transaction takes its own snapshot anyway, so
    the reads see what they would see inside one.

    Writes and row locks are refused with WriteWhileReading before anything reaches the database:
    without a transaction each would take effect, or be released, at once. Changes still pending
    when the block finishes are refused too (a transaction would have committed them)."""
    async with sessionmaker() as session:
        tenancy.scope(session.sync_session, organization_id)
        session.info[_READ_ONLY] = True
        # Only sets the driver connection's mode: asyncpg then sends each statement alone, and the
        # pool puts the mode back at check-in, also without a round trip.
        await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        yield session
        await session.flush()  # nothing to flush: no statement; anything to flush: refused


def is_reading(session: AsyncSession) -> bool:
    """Whether the session is a read-only unit of work (`reading`)."""
    return bool(session.info.get(_READ_ONLY))


@event.listens_for(tenancy.TenantSession, "do_orm_execute")
def _refuse_writes_and_locks(state: ORMExecuteState) -> None:
    if not state.session.info.get(_READ_ONLY):
        return
    if not state.is_select:
        raise WriteWhileReading(f"a read-only unit of work may only SELECT, not run: {str(state.statement)[:200]}")
    if getattr(state.statement, "_for_update_arg", None) is not None:  # with_for_update(); no public accessor
        raise WriteWhileReading("a read-only unit of work takes no row locks (FOR UPDATE/SHARE): each would end at once")


@event.listens_for(tenancy.TenantSession, "before_flush")
def _refuse_flushes(session: Session, flush_context: Any, instances: Any) -> None:
    if not session.info.get(_READ_ONLY):
        return
    changed = [row for row in session.dirty if session.is_modified(row)]
    if session.new or changed or session.deleted:
        rows = [type(row).__name__ for row in (*session.new, *changed, *session.deleted)]
        raise WriteWhileReading(f"a read-only unit of work has changes to store: {', '.join(sorted(rows))}")
