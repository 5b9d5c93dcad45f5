"""The claims of this process's background runs, all held on one connection.

A background run is claimed (a session-level advisory lock keyed by its id) before it is stored and
until it has ended, so a run still `created` whose claim is free was queued by a process that is gone
(background.py). One connection holds every claim of the process: a connection per run made a burst
of background sends open as many PostgreSQL connections as there were runs, past max_connections.

Advisory locks are per session and re-entrant, so claims never wait on each other (two run ids whose
hashes collide simply stack) and releasing one claim leaves the others held. Statements on the
connection go one at a time (asyncpg runs one at a time; each is well under a millisecond).

If the connection ends (the database restarted), the next claim or release opens a new one and takes
every claim still held again first; until then other processes see those runs unclaimed, as they did
when each run's own connection ended.
"""

import asyncio

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.expression import Executable

RUN_CLAIM_CLASS = 0x6D77  # namespaces the claims among other advisory-lock users (turn_lock.py uses 0x6D76)


def _lock(run_id: str) -> Executable:
    return select(func.pg_advisory_lock(RUN_CLAIM_CLASS, func.hashtext(run_id)))


def _unlock(run_id: str) -> Executable:
    return select(func.pg_advisory_unlock(RUN_CLAIM_CLASS, func.hashtext(run_id)))


class RunClaims:
    def __init__(self, lock_engine: AsyncEngine) -> None:
        self._engine = lock_engine
        self._connection: AsyncConnection | None = None
        self._held: set[str] = set()
        self._turn = asyncio.Lock()  # one statement at a time on the connection

    async def claim(self, run_id: str) -> None:
        """Hold the run's claim until release(run_id); shielded, so a cancelled caller cannot leave the
        connection mid-statement (release the claim on any error after calling this)."""
        await asyncio.shield(self._claim(run_id))

    async def _claim(self, run_id: str) -> None:
        async with self._turn:
            try:
                await self._execute(_lock(run_id))
            except (DBAPIError, OSError):  # the connection had ended: retry once on a new one
                await self._discard()
                await self._execute(_lock(run_id))
            self._held.add(run_id)

    async def release(self, run_id: str) -> None:
        """Let go of the run's claim (the run has ended, or was never stored); shielded, so a cancelled
        run still lets go."""
        await asyncio.shield(self._release(run_id))

    async def close(self) -> None:
        """At the process's stop, once its background runs have ended: closing releases what is left."""
        async with self._turn:
            await self._discard()
            self._held.clear()

    async def _release(self, run_id: str) -> None:
        async with self._turn:
            self._held.discard(run_id)
            try:
                await self._execute(_unlock(run_id))
            except (DBAPIError, OSError):  # the connection had ended, and the claim with it
                await self._discard()

    async def _execute(self, statement: Executable) -> None:
        if self._connection is None:
            self._connection = await self._connected()
        await self._connection.execute(statement)

    async def _connected(self) -> AsyncConnection:
        """A new claims connection, holding again every claim the last one held."""
        connection = await self._engine.connect()
        try:
            connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            for run_id in self._held:
                await connection.execute(_lock(run_id))
        except BaseException:
            await asyncio.shield(connection.close())
            raise
        return connection

    async def _discard(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                await connection.invalidate()
                await connection.close()
            except (DBAPIError, OSError):
                pass  # it was already gone


async def run_claimed(lock_engine: AsyncEngine, run_id: str) -> bool:
    """Whether a live process holds the run's claim (asked on a connection of its own: on the claims
    connection the re-entrant lock would always be free)."""
    connection = await lock_engine.connect()
    try:
        free = await connection.scalar(select(func.pg_try_advisory_lock(RUN_CLAIM_CLASS, func.hashtext(run_id))))
        return not free
    finally:
        await asyncio.shield(connection.close())  # releases the claim if we took it
