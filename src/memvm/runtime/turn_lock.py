"""One turn at a time per agent, across every process sharing the database: a PostgreSQL
session-level advisory lock held on a dedicated connection for the whole turn.

The connection comes from an unpooled engine and is closed when the turn ends, which releases
the lock whatever happened (cancellation included); a crashed process releases it the same way.

A background run's claim works the same way: the process that queued the run holds it until the
run has ended, so a run still `created` whose claim is free was queued by a process that is gone.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memvm import metrics
from memvm.errors import Busy

_TURN_LOCK_CLASS = 0x6D76  # namespaces our keys among other advisory-lock users
_RUN_CLAIM_CLASS = 0x6D77
_LOCK_NOT_AVAILABLE = "55P03"


class TurnLockLost(Exception):
    """The connection holding the agent's turn lock ended (the database restarted): another turn may
    hold the lock now, so this one must store nothing more."""


@asynccontextmanager
async def agent_turn_lock(
    lock_engine: AsyncEngine, organization_id: str, agent_id: str, *, timeout_seconds: float
) -> AsyncIterator[asyncio.Event]:
    """Wait up to `timeout_seconds` for the agent's running turn to finish, else raise Busy. The key
    includes the organization, so naming another organization's agent never waits on its turns.

    Yields an event set when the lock's connection ends: a database restart releases the lock while
    the holder still runs, so a turn must check it before storing a step (TurnLockLost)."""
    connection = await lock_engine.connect()
    try:
        connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
        # lock_timeout 0 would mean "wait forever"; 1 ms is the shortest real wait.
        timeout_ms = max(1, int(timeout_seconds * 1000))
        await connection.execute(select(func.set_config("lock_timeout", f"{timeout_ms}ms", False)))
        try:
            with metrics.timed(metrics.TURN_LOCK_SECONDS):
                await connection.execute(
                    select(func.pg_advisory_lock(_TURN_LOCK_CLASS, func.hashtext(f"{organization_id}/{agent_id}")))
                )
        except DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                raise
            raise Busy(
                f"Agent {agent_id!r} is busy with another turn that did not finish within {timeout_seconds:g}s. "
                "Send again when it is done; turns of one agent never run concurrently."
            ) from None
        lost = asyncio.Event()
        raw = (await connection.get_raw_connection()).driver_connection
        if raw is not None:
            raw.add_termination_listener(lambda _connection: lost.set())
        yield lost
    finally:
        # Shielded: a cancelled turn must still close the connection, which releases the lock.
        await asyncio.shield(connection.close())


async def claim_run(lock_engine: AsyncEngine, run_id: str) -> AsyncConnection:
    """A dedicated connection holding the run's claim; close it (shielded) once the run has ended.
    Take it before the run is stored, so no stored `created` run is ever unclaimed while its process lives."""
    connection = await lock_engine.connect()
    try:
        connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(select(func.pg_advisory_lock(_RUN_CLAIM_CLASS, func.hashtext(run_id))))
    except BaseException:
        await asyncio.shield(connection.close())
        raise
    return connection


async def run_claimed(lock_engine: AsyncEngine, run_id: str) -> bool:
    """Whether a live process holds the run's claim."""
    connection = await lock_engine.connect()
    try:
        free = await connection.scalar(select(func.pg_try_advisory_lock(_RUN_CLAIM_CLASS, func.hashtext(run_id))))
        return not free
    finally:
        await asyncio.shield(connection.close())  # releases the claim if we took it
