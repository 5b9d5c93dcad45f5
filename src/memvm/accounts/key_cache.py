"""Verified API keys, remembered per process so a request does not pay a database round trip for
its key; a revocation empties every replica's memory at once.

Revoking a key sends a PostgreSQL NOTIFY in the revoking transaction (service.revoke_key); every
process LISTENs on one dedicated connection and forgets all keys when it arrives. While that
connection is down (not yet up, or lost) nothing is remembered and every request looks its key up.
A lookup that overlapped a revocation is not remembered either (the generation check), so a key
revoked mid-lookup cannot linger.
"""

import asyncio
import contextlib
import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memvm.accounts import service
from memvm.accounts.repository import REVOCATION_CHANNEL
from memvm.actors import Caller
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction

log = logging.getLogger(__name__)
MAX_REMEMBERED = 10_000
RECONNECT_SECONDS = 1.0


class KeyCache:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], listen_engine: AsyncEngine) -> None:
        self._sessionmaker = sessionmaker
        self._listen_engine = listen_engine  # unpooled: the LISTEN connection is ours alone
        self._callers: dict[str, Caller] = {}
        self._generation = 0
        self._listening = False
        self._task: asyncio.Task[None] | None = None

    async def caller_of(self, secret: str) -> Caller | None:
        hashed = service.digest(secret)
        if self._listening and (known := self._callers.get(hashed)) is not None:
            return known
        generation = self._generation
        async with transaction(self._sessionmaker, ALL_ORGANIZATIONS) as session:
            caller = await service.caller_of(session, secret)
        if caller is not None and self._listening and generation == self._generation:
            if len(self._callers) >= MAX_REMEMBERED:
                self._callers.clear()
            self._callers[hashed] = caller
        return caller

    def start(self) -> None:
        self._task = asyncio.create_task(self._listen_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen_forever(self) -> None:
        while True:
            try:
                await self._listen_once()
            except Exception as error:  # the database went away: look keys up until it is back
                log.warning("API key revocation listener lost its connection (%s); reconnecting", error)
            finally:
                self._listening = False
                self._forget()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _listen_once(self) -> None:
        async with self._listen_engine.connect() as connection:
            raw = (await connection.get_raw_connection()).driver_connection
            if raw is None:
                raise ConnectionError("no driver connection to LISTEN on")
            lost = asyncio.Event()
            raw.add_termination_listener(lambda _connection: lost.set())
            await raw.add_listener(REVOCATION_CHANNEL, self._on_revocation)
            self._forget()
            self._listening = True
            await lost.wait()
            raise ConnectionError("the LISTEN connection closed")

    def _on_revocation(self, *_notification: Any) -> None:
        self._forget()

    def forget(self) -> None:
        """A key was revoked through this process: forget now, not when our own NOTIFY comes back
        (it arrives asynchronously, so the revoking client's next request could still be let in)."""
        self._forget()

    def _forget(self) -> None:
        self._generation += 1
        self._callers.clear()
