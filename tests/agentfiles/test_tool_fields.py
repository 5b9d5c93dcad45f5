"""Every tool field memvm stores travels through an agent file (the table: tests/support/tool_fields.py):
set on the custom tool of the real Letta 0.16.8 export, imported over HTTP, read back over the API; then
exported (in either format), the tool deleted, and imported again. The network opt-in in a tool's
metadata survives the trip and the sandbox honours it after import."""

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.support.agent_fields import letta_export
from tests.support.agentfiles import export_file, import_one
from tests.support.sandbox import require_sandbox
from tests.support.tool_fields import EXPECTED, NETWORK, TOOL_NAME, shown, with_every_field

REACH = '''
def reach(port: int) -> str:
    """Connect to a port of the host's loopback.

    Args:
        port: The port to connect to.
    """
    import socket
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    return "connected"
'''


async def tool_of(client, agent_id: str, name: str) -> dict:
    tools = (await client.get(f"/v1/agents/{agent_id}/tools")).json()
    [tool] = [tool for tool in tools if tool["name"] == name]
    return tool


async def round_trip(client, agent_id: str, tool_name: str, *, legacy: bool) -> dict:
    """The agent imported again from its own export, after its tool was deleted (an import reuses a
    tool of the same name, which would hide what the file says)."""
    exported = await export_file(client, agent_id, legacy=legacy)
    deleted = await client.delete(f"/v1/tools/{(await tool_of(client, agent_id, tool_name))['id']}")
    assert deleted.status_code == 204, deleted.text
    return await import_one(client, exported)


@pytest.mark.parametrize("legacy", [False, True], ids=["current-format", "legacy-format"])
async def test_every_letta_tool_field_survives_import_and_a_round_trip(client, legacy: bool):
    imported = await import_one(client, with_every_field())
    first = await tool_of(client, imported["id"], TOOL_NAME)
    again = await round_trip(client, imported["id"], TOOL_NAME, legacy=legacy)

    assert shown(first) == EXPECTED
    assert shown(await tool_of(client, again["id"], TOOL_NAME)) == EXPECTED


@pytest.fixture
async def listener() -> AsyncIterator[int]:
    """A port on the host's loopback that accepts connections."""
    server = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


def reach_export(metadata: dict) -> dict:
    """The real Letta export with `reach` as its only custom tool (and no rules about the one it had)."""
    file = letta_export(tool_rules=[])
    [tool] = [tool for tool in file["tools"] if tool["name"] == TOOL_NAME]
    tool.update(name="reach", source_code=REACH, json_schema=None, args_json_schema=None, metadata_=metadata)
    return file


async def call_reach(client, llm, agent_id: str, port: int) -> dict:
    llm.reply(tool_calls=[("reach", {"port": port})]).reply("done")
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": "go"}]})
    assert response.status_code == 200, response.text
    [returned] = [m for m in response.json()["messages"] if m["message_type"] == "tool_return_message"]
    return returned


async def test_the_network_opt_in_survives_a_round_trip_and_is_honoured(client, llm, settings, listener):
    await require_sandbox(settings)
    imported = await import_one(client, reach_export(NETWORK))
    reached = await call_reach(client, llm, imported["id"], listener)
    again = await round_trip(client, imported["id"], "reach", legacy=False)

    assert reached["status"] == "success", reached["tool_return"]
    assert (await tool_of(client, again["id"], "reach"))["metadata"] == NETWORK
    assert (await call_reach(client, llm, again["id"], listener))["tool_return"] == "connected"


async def test_without_the_opt_in_an_imported_tool_has_no_network(client, llm, settings, listener):
    await require_sandbox(settings)
    imported = await import_one(client, reach_export({}))

    refused = await call_reach(client, llm, imported["id"], listener)

    assert refused["status"] == "error"
    assert refused["tool_return"].startswith(("ConnectionRefusedError", "OSError")), refused["tool_return"]
