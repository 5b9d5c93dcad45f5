"""Cancel signals for the runs this process is running. A cancel request is a flag on the run row
and a NOTIFY (runs.service.request_cancel); every replica LISTENs and sets the event of its own
run. While the LISTEN connection is down, a turn asks the database between steps instead."""

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memvm.db.listener import PgListener
from memvm.db.uow import transaction
from memvm.runs import service as runs
from memvm.runs.service import CANCEL_CHANNEL


class CancelSignals:
    def __init__(self, listen_engine: AsyncEngine) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._listener = PgListener(listen_engine, CANCEL_CHANNEL, self.signal)

    @property
    def listening(self) -> bool:
        return self._listener.listening

    def watch(self, run_id: str) -> asyncio.Event:
        return self._events.setdefault(run_id, asyncio.Event())

    def release(self, run_id: str) -> None:
        self._events.pop(run_id, None)

    async def requested(self, run_id: str, sessionmaker: async_sessionmaker[AsyncSession], organization_id: str) -> bool:
        """Between steps: the run's event, or (while this process cannot LISTEN) the run row."""
        event = self.watch(run_id)
        if not event.is_set() and not self.listening:
            async with transaction(sessionmaker, organization_id) as session:
                if await runs.cancel_requested(session, run_id):
                    event.set()
        return event.is_set()

    def signal(self, run_id: str) -> None:
        """A run was asked to stop (the NOTIFY, or this process's own request)."""
        if (event := self._events.get(run_id)) is not None:
            event.set()

    def start(self) -> None:
        self._listener.start()

    async def stop(self) -> None:
        await self._listener.stop()
