"""How a link reaches its server: stdio servers start in the tool sandbox's jail (stdio.py), SSE
and streamable HTTP ones are reached in-process with the SDK's own transports."""

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from memvm.config import Settings
from memvm.mcpclient.link import OpenTransport
from memvm.mcpclient.stdio import ServerOutput, stdio_transport
from memvm.mcpclient.types import McpUnavailable, ServerConfig
from memvm.sandbox.runner import Sandbox
from memvm.sandbox.servers import ServerCommandMissing, server_launch

# A session may sit idle for hours between calls: reading its event stream has no timeout of its
# own (each request has one).
_IDLE_READ_SECONDS = 24 * 3600.0


def transport_for(config: ServerConfig, settings: Settings, sandbox: Sandbox) -> tuple[OpenTransport, Callable[[], str]]:
    """The transport to open, and what it saw besides messages (for a timeout's reason)."""
    if config.server_type == "stdio":
        return _stdio(config, settings, sandbox)
    if not config.url:
        raise McpUnavailable(f"a {config.server_type} server needs a url")
    url, headers, timeout = config.url, dict(config.headers), settings.mcp_connect_timeout_seconds
    if config.server_type == "sse":
        idle = _IDLE_READ_SECONDS
        return (lambda _fail: sse_client(url, headers=headers, timeout=timeout, sse_read_timeout=idle)), _nothing_seen
    return (lambda _fail: _streamable_http(url, headers, timeout)), _nothing_seen


def _stdio(config: ServerConfig, settings: Settings, sandbox: Sandbox) -> tuple[OpenTransport, Callable[[], str]]:
    launchers = sandbox.ready_launchers()
    if launchers is None:
        why = sandbox.unavailable or "it was not probed"
        raise McpUnavailable(f"stdio servers run in the tool sandbox, which is unavailable: {why}")
    if not config.command:
        raise McpUnavailable("a stdio server needs a command")
    try:
        launch = server_launch(
            launchers,
            settings,
            server_id=config.server_id,
            program=config.command,
            args=config.args,
            env=config.env,
            network=config.network,
        )
    except ServerCommandMissing as missing:
        raise McpUnavailable(str(missing)) from None
    output = ServerOutput()
    return (lambda fail: stdio_transport(launch, settings.mcp_max_message_bytes, output, fail)), output.detail


@asynccontextmanager
async def _streamable_http(url: str, headers: Mapping[str, str], timeout: float) -> AsyncIterator[Any]:
    limits = httpx2.Timeout(timeout, read=_IDLE_READ_SECONDS)
    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=limits) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


def _nothing_seen() -> str:
    """An HTTP server's noise stays in the SDK's transport."""
    return ""
