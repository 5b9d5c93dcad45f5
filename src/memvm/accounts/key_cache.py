"""Verified API keys, remembered per process so a request does not pay a database round trip for
its key; a revocation empties every replica's memory at once.

Revoking a key sends a PostgreSQL NOTIFY in the revoking transaction (service.revoke_key); every
process LISTENs on one dedicated connection and forgets all keys when it arrives. While that
connection is down (not yet up, or lost) nothing is remembered and every request looks its key up.
A lookup that overlapped a revocation is not remembered either (the generation check), so a key
revoked mid-lookup cannot linger.
"""

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memvm.accounts import service
from memvm.accounts.repository import REVOCATION_CHANNEL
from memvm.actors import Caller
from memvm.db.listener import PgListener
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction

MAX_REMEMBERED = 10_000


class KeyCache:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], listen_engine: AsyncEngine) -> None:
        self._sessionmaker = sessionmaker
        self._callers: dict[str, Caller] = {}
        self._generation = 0
        self._listener = PgListener(listen_engine, REVOCATION_CHANNEL, lambda _key_id: self.forget(), self.forget)

    async def caller_of(self, secret: str) -> Caller | None:
        hashed = service.digest(secret)
        if self._listener.listening and (known := self._callers.get(hashed)) is not None:
            return known
        generation = self._generation
        async with transaction(self._sessionmaker, ALL_ORGANIZATIONS) as session:
            caller = await service.caller_of(session, secret)
        if caller is not None and self._listener.listening and generation == self._generation:
            if len(self._callers) >= MAX_REMEMBERED:
                self._callers.clear()
            self._callers[hashed] = caller
        return caller

    def start(self) -> None:
        self._listener.start()

    async def stop(self) -> None:
        await self._listener.stop()

    def forget(self) -> None:
        """Forget every key: on a revocation's NOTIFY, when the LISTEN connection resets, and when a
        key is revoked through this process (not waiting for our own NOTIFY, which arrives
        asynchronously: the revoking client's next request could still be let in)."""
        self._generation += 1
        self._callers.clear()
