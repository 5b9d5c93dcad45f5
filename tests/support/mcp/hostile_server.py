"""A stdio server that misbehaves, one way per mode: `python hostile_server.py MODE`.

hang-initialize: reads requests and never answers.  crash-after-initialize: a proper server that
exits (status 1, a line on stderr) on the first tools/call.  garbage: non-JSON lines, forever.
flood: one 64 MiB line, no newline.  slow-tool: a proper server whose tool `sleep` never returns."""

import asyncio
import os
import sys
import time
from typing import Any


def mcp_server(name: str) -> Any:
    """The SDK's server, imported only by the modes that speak MCP: importing it takes about a second,
    which the modes that never answer would spend inside the client's connect timeout under test."""
    from mcp.server.mcpserver import MCPServer

    return MCPServer(name)


def hang_initialize() -> None:
    for _ in sys.stdin:
        pass
    time.sleep(3600)


def garbage() -> None:
    while True:
        sys.stdout.write("this is not JSON-RPC " * 4 + "\n")
        sys.stdout.flush()


def flood() -> None:
    sys.stdout.write("x" * (64 << 20))
    sys.stdout.flush()
    time.sleep(3600)


def crash_after_initialize() -> None:
    server = mcp_server("crasher")

    @server.tool()
    def echo(text: str) -> str:
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(1)

    server.run("stdio")


def slow_tool() -> None:
    server = mcp_server("sleeper")

    @server.tool()
    async def sleep() -> str:
        await asyncio.sleep(3600)
        return "never"

    server.run("stdio")


MODES = {
    "hang-initialize": hang_initialize,
    "crash-after-initialize": crash_after_initialize,
    "garbage": garbage,
    "flood": flood,
    "slow-tool": slow_tool,
}

if __name__ == "__main__":
    MODES[sys.argv[1]]()
