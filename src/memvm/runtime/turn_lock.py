"""One turn at a time per agent, across every process sharing the database: a PostgreSQL
session-level advisory lock held on a dedicated connection for the whole turn.

The connection comes from an unpooled engine and is closed when the turn ends, which releases
the lock whatever happened (cancellation included); a crashed process releases it the same way.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from memvm import metrics
from memvm.errors import Busy

_TURN_LOCK_CLASS = 0x6D76  # namespaces our keys among other advisory-lock users
_LOCK_NOT_AVAILABLE = "55P03"


@asynccontextmanager
async def agent_turn_lock(
    lock_engine: AsyncEngine, organization_id: str, agent_id: str, *, timeout_seconds: float
) -> AsyncIterator[None]:
    """Wait up to `timeout_seconds` for the agent's running turn to finish, else raise Busy. The key
    includes the organization, so naming another organization's agent never waits on its turns."""
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
        yield
    finally:
        # Shielded: a cancelled turn must still close the connection, which releases the lock.
        await asyncio.shield(connection.close())
