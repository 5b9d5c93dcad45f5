"""The MCP port against real servers: the SDK's own server side over stdio (in the tool sandbox's
jail), streamable HTTP and SSE, and servers that misbehave. No database: the port has none."""

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

import memvm.mcpclient.sdk  # noqa: F401  # a process imports it on its first request: the bounds here are the port's
from memvm.config import Settings
from memvm.mcpclient.connections import Connections
from memvm.mcpclient.types import ServerConfig
from memvm.sandbox.runner import Sandbox
from tests.support.mcp_api import PYTHON, SERVERS
from tests.support.sandbox import require_sandbox


def stdio_config(server_id: str, *args: str, **fields) -> ServerConfig:
    return ServerConfig(server_id, "stdio", command=PYTHON, args=args, **fields)


def tools_server(server_id: str = "mcp-tools", *more_args: str, **fields) -> ServerConfig:
    return stdio_config(server_id, str(SERVERS / "stdio_server.py"), *more_args, **fields)


def hostile_server(mode: str) -> ServerConfig:
    return stdio_config(f"mcp-{mode}", str(SERVERS / "hostile_server.py"), mode)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """memvm's data dir, with a file no server may read."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "agents.db").write_text("private")
    return data


@pytest.fixture
def mcp_settings(data_dir: Path) -> Settings:
    return Settings(
        database_url="postgresql+asyncpg://unused/unused",
        data_dir=data_dir,
        mcp_connect_timeout_seconds=10,
        mcp_list_timeout_seconds=5,
        mcp_call_timeout_seconds=5,
        mcp_max_message_bytes=1 << 20,
        mcp_retry_max_seconds=4,
    )


@pytest.fixture
async def connect(mcp_settings: Settings) -> AsyncIterator[Callable[..., Awaitable[Connections]]]:
    """Connections on settings tuned per test (`await connect(mcp_call_timeout_seconds=1)`), all
    closed after it (their stdio servers killed)."""
    opened: list[Connections] = []

    async def make(**tuned: object) -> Connections:
        settings = mcp_settings.model_copy(update=tuned)
        await require_sandbox(settings)
        sandbox = Sandbox(settings)
        await sandbox.probe()
        opened.append(connections := Connections(settings, sandbox))
        return connections

    yield make
    for connections in opened:
        await connections.close()
