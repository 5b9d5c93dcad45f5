"""The port memvm calls: one long-lived session per server, reused across calls and replaced when
the server's configuration changes. A session that fails (a timeout, a crash, a closed stream, an
answer that is not MCP) is torn down, and the next use reconnects after a back-off (1 s, doubling,
at most mcp_retry_max_seconds) during which calls fail at once. Each server has its own state and
lock: one server's failure never waits on, or blocks, another's.

The SDK's side (sdk.py) is imported on the process's first request, in a thread, so that the event
loop goes on serving meanwhile."""

import asyncio
import importlib
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from memvm.config import Settings
from memvm.mcpclient.types import CallResult, McpUnavailable, RemoteTool, ServerConfig
from memvm.sandbox.runner import Sandbox

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

    from memvm.mcpclient.link import Link

log = logging.getLogger(__name__)
T = TypeVar("T")
_SHORTEST_SECRET = 6


@dataclass
class _Server:
    """One server's session and back-off; `lock` serializes connecting, never requests."""

    fingerprint: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    link: "Link | None" = None
    failures: int = 0
    retry_at: float = 0.0  # time.monotonic()
    reason: str = ""
    failed: "Link | None" = None  # the last link counted as a failure (concurrent requests share one)


class Connections:
    """One per process."""

    def __init__(self, settings: Settings, sandbox: Sandbox) -> None:
        self._settings = settings
        self._sandbox = sandbox
        self._servers: dict[str, _Server] = {}

    async def list_tools(self, config: ServerConfig) -> list[RemoteTool]:
        """Every page of tools/list, all under one list timeout."""
        await _import_sdk()
        from memvm.mcpclient import sdk

        tools = await self._request(config, sdk.all_tools, self._settings.mcp_list_timeout_seconds, "tools/list")
        return [sdk.remote_tool(tool) for tool in tools]

    async def call_tool(
        self, config: ServerConfig, name: str, arguments: dict[str, Any], timeout: float | None = None
    ) -> CallResult:
        await _import_sdk()
        from memvm.mcpclient import sdk

        call, timeout = sdk.tool_call(name, arguments), timeout or self._settings.mcp_call_timeout_seconds
        try:
            result = await self._request(config, call, timeout, "tools/call")
        except sdk.MCPError as error:
            return sdk.error_result(error.message)
        return sdk.call_result(result)

    async def forget(self, server_id: str) -> None:
        """The server was deleted or edited: close its session (a stdio server is killed)."""
        server = self._servers.pop(server_id, None)
        if server is not None and server.link is not None:
            await server.link.close()

    async def close(self) -> None:
        """The process ends: close every session, kill every stdio server."""
        servers, self._servers = list(self._servers.values()), {}
        await asyncio.gather(*(server.link.close() for server in servers if server.link is not None))

    async def _request(
        self, config: ServerConfig, send: Callable[["ClientSession"], Awaitable[T]], timeout: float, what: str
    ) -> T:
        server, link = await self._link(config)
        try:
            return await link.request(send, timeout, what)
        except McpUnavailable as unavailable:
            await self._failed(config, server, link, str(unavailable))
            raise self._unavailable(config, str(unavailable)) from None

    async def _link(self, config: ServerConfig) -> tuple[_Server, "Link"]:
        from memvm.mcpclient.sdk import Link, transport_for  # imported by the request's _import_sdk

        server = await self._server(config)
        async with server.lock:
            if server.link is not None and server.link.alive:
                return server, server.link
            if server.link is not None:  # it died between calls (a crash, the CPU limit)
                await self._failed(config, server, server.link, server.link.failure or "the session ended")
            if (wait := server.retry_at - time.monotonic()) > 0:
                raise self._unavailable(config, f"unavailable, next attempt in {math.ceil(wait)} s: {server.reason}")
            try:
                open_transport, detail = transport_for(config, self._settings, self._sandbox)
            except McpUnavailable as cannot:  # the host or the configuration: no server to back off from
                raise self._unavailable(config, str(cannot)) from None
            link = Link(open_transport, detail)
            try:
                await link.open(self._settings.mcp_connect_timeout_seconds)
            except McpUnavailable as unavailable:
                await self._failed(config, server, link, str(unavailable))
                raise self._unavailable(config, str(unavailable)) from None
            except asyncio.CancelledError:  # the caller gave up: nothing else would stop the server
                await link.close()
                raise
            if self._servers.get(config.server_id) is not server:  # forgotten or edited meanwhile
                await link.close()
                raise self._unavailable(config, "its configuration changed while connecting")
            server.link, server.failures, server.retry_at = link, 0, 0.0
            return server, link

    async def _server(self, config: ServerConfig) -> _Server:
        """The server's state; an edited configuration starts afresh (and closes the old session)."""
        server = self._servers.get(config.server_id)
        if server is not None and server.fingerprint == config.fingerprint:
            return server
        self._servers[config.server_id] = fresh = _Server(config.fingerprint)
        if server is not None and server.link is not None:
            await server.link.close()
        return fresh

    async def _failed(self, config: ServerConfig, server: _Server, link: "Link", reason: str) -> None:
        """Tear the link down; its first failure starts (or lengthens) the back-off."""
        reason = _redacted(reason, config)
        if server.failed is not link:
            server.failed = link
            if server.link is link:
                server.link = None
            server.failures += 1
            delay = min(2.0 ** (server.failures - 1), self._settings.mcp_retry_max_seconds)
            server.retry_at, server.reason = time.monotonic() + delay, reason
            log.warning("MCP server %s: %s (next attempt in %g s)", config.server_id, reason, delay)
        await link.close()

    def _unavailable(self, config: ServerConfig, reason: str) -> McpUnavailable:
        return McpUnavailable(f"MCP server {config.server_id}: {_redacted(reason, config)}")


def _redacted(reason: str, config: ServerConfig) -> str:
    """A server may echo a secret it was given (a key in its last stderr line, a token in an error):
    none reaches a log or an agent. Short values ("1", "true") are not secrets, and would mangle text."""
    secrets = [*config.env.values(), *config.headers.values()]
    secrets += [word for value in config.headers.values() for word in value.split()]  # "Bearer <token>"
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _SHORTEST_SECRET:
            reason = reason.replace(secret, "[redacted]")
    return reason


async def _import_sdk() -> None:
    """sdk.py, imported once per process, in a thread: the import takes most of a second of CPU."""
    if "memvm.mcpclient.sdk" not in sys.modules:
        await asyncio.to_thread(importlib.import_module, "memvm.mcpclient.sdk")
