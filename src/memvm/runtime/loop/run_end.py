"""A run's end, stored once the database is back. A turn cut off by a database outage could not
store it, and no other process will go on with the run: retried here so that no run stays active
after the outage (a restart would fail it too, but a running server must not wait for one)."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from memvm.db.engine import database_unreachable
from memvm.db.uow import transaction
from memvm.runs import service as runs
from memvm.runtime.loop.deps import RuntimeDeps

log = logging.getLogger(__name__)
# The pauses between tries, about 5 minutes in all.
END_RETRY_PAUSES = (0.5, 1.0, 2.0, *(5.0,) * 60)


async def when_reachable(run_id: str, store_end: Callable[[], Awaitable[None]]) -> None:
    """`store_end()`, retried while the database is unreachable."""
    for pause in END_RETRY_PAUSES:
        try:
            return await store_end()
        except Exception as failure:
            if not database_unreachable(failure):
                raise
            reason = getattr(failure, "orig", failure)
            log.warning("run %s: cannot store its end yet (%s); retrying in %g s", run_id, reason, pause)
        await asyncio.sleep(pause)
    log.error("run %s: gave up storing its end; the next start-up fails it", run_id)


def fail_when_reachable(deps: RuntimeDeps, organization_id: str, run_id: str) -> None:
    """In the background of this process: fail a run whose turn the database cut off."""

    async def fail() -> None:
        async with transaction(deps.sessionmaker, organization_id) as session:
            await runs.fail_cut_off(session, run_id)

    deps.in_background(when_reachable(run_id, fail))
