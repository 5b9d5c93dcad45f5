"""One turn at a time per conversation (an agent's default conversation is keyed by the agent's
id, another by its own), across every process sharing the database: a PostgreSQL session-level
advisory lock held on a dedicated connection for the whole turn.

That connection comes from a pool of its own (db/engine.py, build_turn_lock_engine). The turn
unlocks before handing it back; when it cannot be sure it did (an error, cancellation, a lost
connection), the connection is discarded instead, and closing it releases the lock whatever
happened. A crashed process releases its locks the same way.

A background run's claim is held on an unpooled connection until the run has ended, so a run still
`created` whose claim is free was queued by a process that is gone.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memvm import metrics
from memvm.errors import Busy

_TURN_LOCK_CLASS = 0x6D76  # namespaces our keys among other advisory-lock users
RUN_CLAIM_CLASS = 0x6D77
_LOCK_NOT_AVAILABLE = "55P03"
# One round trip: the FROM subquery (volatile, so never flattened) sets the wait limit before the
# lock is requested. lock_timeout 0 would mean "wait forever"; 1 ms is the shortest real wait.
_WAIT_LIMIT = select(func.set_config("lock_timeout", bindparam("timeout"), False).label("lock_timeout")).subquery()
_LOCK = select(func.pg_advisory_lock(_TURN_LOCK_CLASS, func.hashtext(bindparam("key")))).select_from(_WAIT_LIMIT)
# The connection serves nothing but turn locks: releasing all of them cannot touch another's.
_UNLOCK = select(func.pg_advisory_unlock_all())


class TurnLockLost(Exception):
    """The connection holding the conversation's turn lock ended (the database restarted): another turn may
    hold the lock now, so this one must store nothing more."""


@asynccontextmanager
async def turn_lock(
    turn_lock_engine: AsyncEngine, organization_id: str, key: str, *, timeout_seconds: float
) -> AsyncIterator[asyncio.Event]:
    """Wait up to `timeout_seconds` for the running turn of `key` (an agent's or a conversation's id)
    to finish, else raise Busy. The lock's key includes the organization, so naming another
    organization's agent never waits on its turns.

    Yields an event set when the lock's connection ends: a database restart releases the lock while
    the holder still runs, so a turn must check it before storing a step (TurnLockLost)."""
    connection = await turn_lock_engine.connect()
    lost = asyncio.Event()
    state = _Held()
    try:
        wait_limit = f"{max(1, int(timeout_seconds * 1000))}ms"
        try:
            with metrics.timed(metrics.TURN_LOCK_SECONDS):
                await connection.execute(_LOCK, {"timeout": wait_limit, "key": f"{organization_id}/{key}"})
        except DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                raise
            state.refused = True
            what = f"Agent {key!r}" if key.startswith("agent-") else f"Conversation {key!r}"
            raise Busy(
                f"{what} is busy with another active run that did not finish within {timeout_seconds:g}s. "
                "Send again when it is done; turns of one conversation never run concurrently."
            ) from None
        state.driver = (await connection.get_raw_connection()).driver_connection
        state.driver.add_termination_listener(state.on_end(lost))
        yield lost
    finally:
        # Shielded: a cancelled turn must still give the connection back or discard it.
        await asyncio.shield(state.hand_back(connection, lost))


class _Held:
    """What a turn-lock connection holds, so it goes back to the pool only when it holds nothing."""

    def __init__(self) -> None:
        self.refused = False  # the lock timed out: nothing is held
        self.driver: Any = None  # set once the lock is held
        self._listener: Any = None

    def on_end(self, lost: asyncio.Event) -> Any:
        def ended(_connection: object) -> None:
            lost.set()

        self._listener = ended
        return ended

    async def hand_back(self, connection: AsyncConnection, lost: asyncio.Event) -> None:
        """Unlocked and pooled, or discarded: closing the PostgreSQL session releases what it holds.
        A lock statement that failed or was cancelled leaves the lock unknown, so it discards too."""
        if self.driver is not None:
            self.driver.remove_termination_listener(self._listener)
        keep = self.refused
        if self.driver is not None and not lost.is_set():
            try:
                await connection.execute(_UNLOCK)
                keep = True
            except (DBAPIError, OSError):
                keep = False
        if not keep:
            await connection.invalidate()
        await connection.close()


async def claim_run(lock_engine: AsyncEngine, run_id: str) -> AsyncConnection:
    """A dedicated connection holding the run's claim; close it (shielded) once the run has ended.
    Take it before the run is stored, so no stored `created` run is ever unclaimed while its process lives."""
    connection = await lock_engine.connect()
    try:
        connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(select(func.pg_advisory_lock(RUN_CLAIM_CLASS, func.hashtext(run_id))))
    except BaseException:
        await asyncio.shield(connection.close())
        raise
    return connection


async def run_claimed(lock_engine: AsyncEngine, run_id: str) -> bool:
    """Whether a live process holds the run's claim."""
    connection = await lock_engine.connect()
    try:
        free = await connection.scalar(select(func.pg_try_advisory_lock(RUN_CLAIM_CLASS, func.hashtext(run_id))))
        return not free
    finally:
        await asyncio.shield(connection.close())  # releases the claim if we took it
