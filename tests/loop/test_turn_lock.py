"""The turn lock's pooled connections: each goes back to the pool holding no lock, or is discarded.
A leaked lock would make the agent busy for every other process (and re-entrant for this one)."""

import asyncio

import pytest
from sqlalchemy import text

from memvm.db.engine import build_turn_lock_engine
from memvm.errors import Busy
from memvm.runtime.loop.turn_lock import turn_lock

TURN_LOCKS = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 28022"  # 0x6D76
LOCKING_SESSION = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 28022 AND granted = $1"


@pytest.fixture
async def engines(database_url, settings):
    """Two turn-lock engines: two processes of one server."""
    first, second = build_turn_lock_engine(database_url, settings), build_turn_lock_engine(database_url, settings)
    yield first, second
    await first.dispose()
    await second.dispose()


async def next_session(engine) -> int:
    """The PostgreSQL session the engine's next checkout gets: the pooled one, or a new one."""
    async with engine.connect() as connection:
        return await connection.scalar(text("SELECT pg_backend_pid()"))


async def waiting_session(db, seconds: float = 10) -> int | None:
    """The session waiting for a turn lock, once its lock statement has reached the server."""
    deadline = asyncio.get_running_loop().time() + seconds
    while (pid := await db.fetchval(LOCKING_SESSION, False)) is None and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    return pid


async def no_turn_lock_within(db, seconds: float) -> bool:
    """A discarded connection's session ends (and drops its locks) just after it is closed."""
    deadline = asyncio.get_running_loop().time() + seconds
    while await db.fetchval(TURN_LOCKS):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_a_released_lock_leaves_its_connection_pooled_and_holding_nothing(engines, db):
    engine, other = engines
    async with turn_lock(engine, "org", "agent-1", timeout_seconds=1):
        holder = await db.fetchval(LOCKING_SESSION, True)

    assert await db.fetchval(TURN_LOCKS) == 0 and await next_session(engine) == holder
    async with turn_lock(other, "org", "agent-1", timeout_seconds=0.2):  # another process gets it at once
        pass


async def test_a_busy_agent_refuses_and_the_refused_connection_is_reused(engines, db):
    holder, waiter = engines
    async with turn_lock(holder, "org", "agent-1", timeout_seconds=1):
        refused = await next_session(waiter)
        with pytest.raises(Busy):
            async with turn_lock(waiter, "org", "agent-1", timeout_seconds=0.05):
                pass
        assert await next_session(waiter) == refused
    assert await db.fetchval(TURN_LOCKS) == 0


async def test_a_turn_cancelled_while_it_waits_leaves_no_lock_behind(engines, db):
    holder, waiter = engines

    async def wait_for_the_lock() -> None:
        async with turn_lock(waiter, "org", "agent-1", timeout_seconds=10):
            await asyncio.sleep(10)

    async with turn_lock(holder, "org", "agent-1", timeout_seconds=1):
        waiting = asyncio.create_task(wait_for_the_lock())
        waited_in = await waiting_session(db)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    # The cancelled lock statement may still be granted: its session was ended, not pooled.
    assert waited_in is not None and await next_session(waiter) != waited_in
    assert await no_turn_lock_within(db, 3)
    async with turn_lock(holder, "org", "agent-1", timeout_seconds=0.2):
        pass


async def test_a_lock_whose_connection_ended_reports_it_and_is_discarded(engines, db):
    engine, _ = engines
    async with turn_lock(engine, "org", "agent-1", timeout_seconds=1) as lost:
        holder = await db.fetchval(LOCKING_SESSION, True)
        await db.execute("SELECT pg_terminate_backend($1)", holder)
        await asyncio.wait_for(lost.wait(), 5)

    assert await next_session(engine) != holder and await no_turn_lock_within(db, 3)
