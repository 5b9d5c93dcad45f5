"""A stdio server in the tool sandbox's jail: its tools, its session kept and replaced, its jail."""

import asyncio
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from memvm.mcpclient.connections import Connections
from memvm.mcpclient.types import McpUnavailable
from memvm.sandbox.runner import Sandbox
from tests.mcp.conftest import tools_server


def running(config) -> list[psutil.Process]:
    """The server's processes (bubblewrap's and the server's own), whatever uid they run as."""
    script = config.args[0]
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if script in (process.info["cmdline"] or []):
            found.append(process)
    return found


async def test_lists_and_calls_tools(connect):
    connections = await connect()
    config = tools_server()

    tools = {tool.name: tool for tool in await connections.list_tools(config)}
    echoed = await connections.call_tool(config, "echo", {"text": "hello"})
    added = await connections.call_tool(config, "add", {"a": 2, "b": 3})
    big = await connections.call_tool(config, "big", {"n": 100_000})
    failed = await connections.call_tool(config, "fail", {})
    unknown = await connections.call_tool(config, "no_such_tool", {})

    assert set(tools) == {"echo", "add", "slow", "big", "fail", "whoami"}
    assert tools["add"].input_schema["properties"].keys() == {"a", "b"}
    assert (echoed.text, echoed.is_error) == ("hello", False)
    assert (added.text, added.is_error) == ("5", False)
    assert big.text == "x" * 100_000
    assert failed.is_error and "fail" in failed.text
    assert unknown.is_error and "no_such_tool" in unknown.text


async def test_the_session_is_kept_and_replaced_when_the_config_changes(connect):
    connections = await connect()
    config = tools_server()

    started = time.monotonic()
    await connections.call_tool(config, "echo", {"text": "first"})
    first_connect = time.monotonic() - started
    first = {process.pid for process in running(config)}
    started = time.monotonic()
    await connections.call_tool(config, "echo", {"text": "again"})
    warm_call = time.monotonic() - started
    again = {process.pid for process in running(config)}
    edited = tools_server(env={"SOMETHING": "new"})
    await connections.call_tool(edited, "echo", {"text": "edited"})
    replaced = {process.pid for process in running(edited)}

    print(f"first connect and call in the jail: {first_connect:.2f} s; a call on the warm session: {warm_call * 1000:.0f} ms")
    assert first and again == first
    assert replaced and not replaced & first


async def test_forget_and_close_kill_the_server(connect):
    connections = await connect()
    one, two = tools_server("mcp-one"), tools_server("mcp-two")
    await connections.list_tools(one)
    await connections.list_tools(two)
    assert running(one)

    await connections.forget("mcp-one")
    assert running(two), "forgetting one server leaves the others running"
    await connections.close()

    assert not running(one)


async def test_a_caller_that_gives_up_while_connecting_leaves_no_server(connect):
    connections = await connect()
    config = tools_server("mcp-abandoned")
    connecting = asyncio.create_task(connections.list_tools(config))
    await asyncio.sleep(0.3)
    assert running(config), "the server is starting"

    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting

    assert not running(config)
    assert await connections.list_tools(config), "the next caller connects"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root switches a server to its own uid")
async def test_the_server_runs_as_its_own_uid(connect):
    connections = await connect()

    seen = await whoami(connections, tools_server())

    assert seen["uid"] not in (0, os.getuid())


async def test_the_server_sees_neither_memvm_files_nor_the_network(connect, data_dir):
    connections = await connect()
    with listening() as port:
        jailed = await whoami(connections, tools_server(), path=str(data_dir / "agents.db"), port=port)
        networked = await whoami(connections, tools_server("mcp-networked", network=True), port=port)

    assert jailed == {**jailed, "can_read": False, "can_connect": False}
    assert networked["can_connect"] is True


async def test_paths_in_the_arguments_are_bound_read_only_with_their_own_modes(connect):
    """An argument's directory is visible in the jail; a root-only file in it stays unreadable.
    (pytest's tmp_path lies below a directory only root may enter: such paths are refused.)"""
    shared = Path(tempfile.mkdtemp(prefix="memvm-mcp-shared-"))
    (shared / "public.txt").write_text("anyone")
    (shared / "root-only.txt").write_text("root")
    (shared / "root-only.txt").chmod(0o600)
    shared.chmod(0o755)
    connections = await connect()
    config = tools_server("mcp-shared", str(shared))

    try:
        public = await whoami(connections, config, path=str(shared / "public.txt"))
        root_only = await whoami(connections, config, path=str(shared / "root-only.txt"))
    finally:
        shutil.rmtree(shared)

    assert public["can_read"] is True
    assert root_only["can_read"] is (os.geteuid() != 0)


async def test_a_stdio_server_needs_the_sandbox(mcp_settings):
    unprobed = Connections(mcp_settings, Sandbox(mcp_settings))

    with pytest.raises(McpUnavailable, match="tool sandbox, which is unavailable"):
        await unprobed.list_tools(tools_server())


async def test_a_missing_command_is_unavailable(connect):
    connections = await connect()
    config = tools_server()
    missing = type(config)("mcp-missing", "stdio", command="no-such-mcp-server-command")

    with pytest.raises(McpUnavailable, match="not an executable"):
        await connections.list_tools(missing)


async def whoami(connections: Connections, config, path: str = "", port: int = 0) -> dict:
    result = await connections.call_tool(config, "whoami", {"path": path, "host": "127.0.0.1", "port": port})
    assert not result.is_error, result.text
    return json.loads(result.text)


@contextmanager
def listening() -> Iterator[int]:
    """A loopback TCP port that accepts connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("named", ["data dir", "private dir", "parent of the data dir"])
async def test_arguments_naming_what_a_server_may_not_see_are_refused(connect, data_dir, tmp_path, named):
    """memvm's data directory (even readable by all), a directory only its owner may enter, or a
    directory above the data directory would show memvm's files to a server running as its uid."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    data_dir.chmod(0o755)
    path = {"data dir": data_dir, "private dir": private, "parent of the data dir": tmp_path}[named]
    connections = await connect()

    with pytest.raises(McpUnavailable, match="which a stdio server may not see"):
        await connections.list_tools(tools_server(f"mcp-{named.replace(' ', '-')}", str(path)))
