"""One turn at a time per conversation (an agent's default conversation is keyed by the agent's
id, another by its own), across every process sharing the database: a PostgreSQL session-level
advisory lock held on a dedicated connection for the whole turn.

That connection comes from a pool of its own (db/engine.py, build_turn_lock_engine). The turn
unlocks before handing it back; when it cannot be sure it did (an error, cancellation, a lost
connection), the connection is discarded instead, and closing it releases the lock whatever
happened. A crashed process releases its locks the same way.

That pool is bounded (db_turn_lock_pool_size): it is how many turns a process runs at once, and a
send beyond them waits for a connection, then gets Overloaded (503). A send to a conversation this
process is already sending to waits in line in memory (_first_in_line), holding no connection, so
sends piled up on one busy conversation cannot take the connections other conversations need.

None of these waits can deadlock. A turn-lock connection is taken holding no session connection
(routes and background runs take the lock first, holding at most a run's claim, on a connection of its own) and
no other turn-lock connection (a turn never starts another); session connections are taken by turns
and requests that never wait for a turn-lock connection before they give them back; a send in line
holds nothing, and the one ahead of it waits on nothing a waiter holds. So every wait is for something
whose holder is running.

A background run's claim is held on this process's claims connection until the run has ended
(run_claims.py); taking or releasing one waits only for other claims' statements.
"""

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memvm import metrics
from memvm.errors import Busy, Overloaded

_TURN_LOCK_CLASS = 0x6D76  # namespaces our keys among other advisory-lock users
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
    lock_key, clock = f"{organization_id}/{key}", asyncio.get_running_loop()
    started = clock.time()
    async with _first_in_line(turn_lock_engine, lock_key, key, timeout_seconds):
        seconds_left = started + timeout_seconds - clock.time()
        async with _held_lock(turn_lock_engine, lock_key, seconds_left, _busy(key, timeout_seconds)) as lost:
            metrics.TURN_LOCK_SECONDS.observe(clock.time() - started)
            yield lost


class _Line:
    """This process's sends waiting for one conversation, and how many use the line."""

    def __init__(self) -> None:
        self.turn = asyncio.Lock()
        self.users = 0


# Per turn-lock engine (one per process; tests build several): the lines of its conversations.
_LINES: weakref.WeakKeyDictionary[AsyncEngine, dict[str, _Line]] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def _first_in_line(turn_lock_engine: AsyncEngine, lock_key: str, key: str, timeout_seconds: float) -> AsyncIterator[None]:
    """Wait behind this process's earlier sends to the same conversation, holding no connection: of
    several sends piled up on one busy conversation only the first takes a turn-lock connection, so
    they never use up the bounded pool that other conversations' turns need."""
    lines = _LINES.setdefault(turn_lock_engine, {})
    line = lines.setdefault(lock_key, _Line())
    line.users += 1
    try:
        try:
            async with asyncio.timeout(timeout_seconds):
                await line.turn.acquire()
        except TimeoutError:
            raise _busy(key, timeout_seconds) from None
        try:
            yield
        finally:
            line.turn.release()
    finally:
        line.users -= 1
        if not line.users:
            del lines[lock_key]


def _busy(key: str, timeout_seconds: float) -> Busy:
    what = f"Agent {key!r}" if key.startswith("agent-") else f"Conversation {key!r}"
    return Busy(
        f"{what} is busy with another active run that did not finish within {timeout_seconds:g}s. "
        "Send again when it is done; turns of one conversation never run concurrently."
    )


@asynccontextmanager
async def _held_lock(
    turn_lock_engine: AsyncEngine, lock_key: str, timeout_seconds: float, busy: Busy
) -> AsyncIterator[asyncio.Event]:
    """The advisory lock of `lock_key` on a turn-lock connection, waited for up to `timeout_seconds`
    (other processes' turns), else `busy` is raised."""
    connection = await _lock_connection(turn_lock_engine)
    lost = asyncio.Event()
    state = _Held()
    try:
        wait_limit = f"{max(1, int(timeout_seconds * 1000))}ms"
        try:
            await connection.execute(_LOCK, {"timeout": wait_limit, "key": lock_key})
        except DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                raise
            state.refused = True
            raise busy from None
        state.driver = (await connection.get_raw_connection()).driver_connection
        state.driver.add_termination_listener(state.on_end(lost))
        yield lost
    finally:
        # Shielded: a cancelled turn must still give the connection back or discard it.
        await asyncio.shield(state.hand_back(connection, lost))


async def _lock_connection(turn_lock_engine: AsyncEngine) -> AsyncConnection:
    """A connection of the turn-lock pool, waited for while this process runs as many turns as it may."""
    try:
        return await turn_lock_engine.connect()
    except PoolTimeout:
        raise Overloaded(
            "This server is running as many turns as it may at once (MEMVM_DB_TURN_LOCK_POOL_SIZE) and none ended "
            "while this send waited (MEMVM_DB_POOL_TIMEOUT_SECONDS); send it again in a moment."
        ) from None


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
