"""The tools every well-behaved test server offers, over stdio, streamable HTTP and SSE. This
module runs inside the jail too: it imports nothing from memvm or the tests."""

import asyncio
import os
import socket

from mcp.server.mcpserver import MCPServer


def build_server() -> MCPServer:
    server = MCPServer("memvm-test")

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @server.tool()
    def big(n: int) -> str:
        return "x" * n

    @server.tool()
    def fail() -> str:
        raise RuntimeError("failed on purpose")

    @server.tool()
    def whoami(path: str = "", host: str = "", port: int = 0) -> dict[str, object]:
        """The server's uid, whether it may read `path`, whether it may connect to host:port."""
        return {"uid": os.getuid(), "can_read": _can_read(path), "can_connect": _can_connect(host, port)}

    return server


def _can_read(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError:
        return False
    return True


def _can_connect(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False
