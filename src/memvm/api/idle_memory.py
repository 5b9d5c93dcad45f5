"""Heap that a burst of requests freed goes back to the OS once the process has been idle a moment.

glibc keeps what a process frees for its next allocations, and after a busy spell an HTTP process
keeps megabytes it no longer uses (large request and response bodies, rows, JSON). malloc_trim hands
the free pages back; this runs it once per quiet spell, never while a request is being served (a
request that arrives during the call waits for it: 0.3-0.7 ms after a busy spell; bench/README.md,
"Freed memory returned when idle")."""

import asyncio
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from memvm.processes import return_freed_memory

QUIET_SECONDS = 1.0


class ReturnMemoryWhenIdle:
    """ASGI middleware: `release` runs QUIET_SECONDS after the last request in flight ended, unless
    another began meanwhile."""

    def __init__(
        self, app: ASGIApp, quiet_seconds: float = QUIET_SECONDS, release: Callable[[], None] = return_freed_memory
    ) -> None:
        self.app = app
        self._quiet_seconds = quiet_seconds
        self._release = release
        self._in_flight = 0
        self._pending: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._pending = asyncio.get_running_loop().call_later(self._quiet_seconds, self._released)

    def _released(self) -> None:
        self._pending = None
        self._release()
