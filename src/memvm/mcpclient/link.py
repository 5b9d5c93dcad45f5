"""One live session with one server. The session lives in a task of its own, which enters and
leaves the transport's and the SDK's ClientSession's context managers (anyio cancel scopes must
exit in the task that entered them); callers' tasks send their requests through the session, each
under a timeout, and stop waiting as soon as the session ends."""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from mcp import types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from memvm.mcpclient.types import McpUnavailable

T = TypeVar("T")
Transport = AbstractAsyncContextManager[tuple[Any, Any]]
# Builds the transport of a link; the argument records why the link ends, and ends it.
OpenTransport = Callable[[Callable[[str], None]], Transport]
_CLOSE_GRACE_SECONDS = 2.0
# Codes the SDK gives a request whose answer can never come: the link is gone, not the request wrong.
_LINK_ERRORS = (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT, types.PARSE_ERROR)


class Link:
    def __init__(self, open_transport: OpenTransport, detail: Callable[[], str]) -> None:
        self.failure: str | None = None  # why it ended (the first reason wins)
        self._open_transport = open_transport
        self._detail = detail  # what the transport saw, added to a timeout's reason
        self._session: ClientSession | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and self.failure is None

    async def open(self, timeout: float) -> None:
        """Start the session's task and wait for initialize; McpUnavailable if it fails or hangs."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready))
        await self._bounded(ready, timeout, "connect and initialize")

    async def request(self, send: Callable[[ClientSession], Awaitable[T]], timeout: float, what: str) -> T:
        """One request under `timeout`. An error answer from the server stays an MCPError (the
        caller decides); anything that ends the link is McpUnavailable."""
        assert self._session is not None, "request before open"
        try:
            return await self._bounded(send(self._session), timeout, what)
        except MCPError as error:
            if error.code in _LINK_ERRORS:
                raise self._unavailable(error.message) from None
            raise
        except McpUnavailable:
            raise
        except Exception as error:  # a transport failure, or an answer that is not MCP
            raise self._unavailable(describe(error)) from None

    def fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
        self._stop.set()

    async def close(self) -> None:
        """End the session's task: its transport stops the server or the connection."""
        self.fail("the session was closed")
        if self._task is None:
            return
        # Before initialize answered, nothing waits on the stop: the task is cancelled at once.
        grace = _CLOSE_GRACE_SECONDS if self._session is not None else 0
        done, _ = await asyncio.wait({self._task}, timeout=grace) if grace else (set(), set())
        if not done:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self, ready: asyncio.Future[None]) -> None:
        try:
            async with self._open_transport(self.fail) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self._session = session
                if not ready.done():
                    ready.set_result(None)
                await self._stop.wait()
        except Exception as error:
            self.fail(describe(error))

    async def _bounded(self, step: Awaitable[T], timeout: float, what: str) -> T:
        """Wait for `step`, at most `timeout`, and no longer than the link lives."""
        assert self._task is not None
        pending = asyncio.ensure_future(step)
        try:
            done, _ = await asyncio.wait({pending, self._task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if pending in done and not pending.cancelled():  # cancelled: the session's own task group ended it
                return pending.result()
            if self._task in done or self.failure is not None:
                raise self._unavailable("the session ended")
            raise self._unavailable(f"{what} took longer than {timeout:g} s{self._detail()}")
        finally:
            if not pending.done():
                pending.cancel()

    def _unavailable(self, reason: str) -> McpUnavailable:
        """End the link, saying why: the reason it recorded first (a server that died says how)."""
        self.fail(reason)
        return McpUnavailable(self.failure or reason)


def describe(error: BaseException) -> str:
    """One line: the innermost error of a group, its type, its message (never headers or env)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
