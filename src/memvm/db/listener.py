"""One PostgreSQL LISTEN connection per channel and process, kept up: how a replica hears what
another replica did (a revoked key, a cancelled run) without any server but PostgreSQL.

While the connection is down (not yet up, or lost) `listening` is False and notifications may be
missed; `on_reset` runs whenever that happens, so the owner can fall back to asking the database."""

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)
RECONNECT_SECONDS = 1.0


class PgListener:
    def __init__(
        self, engine: AsyncEngine, channel: str, on_notify: Callable[[str], None], on_reset: Callable[[], None] = lambda: None
    ) -> None:
        self._engine = engine  # unpooled: the LISTEN connection is ours alone
        self._channel = channel
        self._on_notify = on_notify
        self._on_reset = on_reset
        self.listening = False
        self._task: asyncio.Task[None] | None = None

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
            except Exception as error:  # the database went away: the owner asks it directly until it is back
                log.warning("LISTEN %s lost its connection (%s); reconnecting", self._channel, error)
            finally:
                self.listening = False
                self._on_reset()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _listen_once(self) -> None:
        async with self._engine.connect() as connection:
            raw = (await connection.get_raw_connection()).driver_connection
            if raw is None:
                raise ConnectionError("no driver connection to LISTEN on")
            lost = asyncio.Event()
            raw.add_termination_listener(lambda _connection: lost.set())
            await raw.add_listener(self._channel, lambda *notification: self._on_notify(str(notification[-1])))
            self._on_reset()
            self.listening = True
            await lost.wait()
            raise ConnectionError("the LISTEN connection closed")
