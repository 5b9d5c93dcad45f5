"""What the MCP tests over HTTP share: the test servers as POST /v1/mcp-servers/ bodies."""

import os
import sys
from pathlib import Path

import httpx

SERVERS = Path(__file__).parent / "mcp"
PYTHON = os.path.realpath(sys.executable)  # the pyenv `python3` on PATH is a shim script


def stdio_body(name: str = "tools", script: str = "stdio_server.py", *args: str, **config) -> dict:
    return {
        "server_name": name,
        "config": {"mcp_server_type": "stdio", "command": PYTHON, "args": [str(SERVERS / script), *args], **config},
    }


async def add_server(client: httpx.AsyncClient, body: dict) -> dict:
    response = await client.post("/v1/mcp-servers/", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def server_tools(client: httpx.AsyncClient, server_id: str) -> dict[str, dict]:
    response = await client.get(f"/v1/mcp-servers/{server_id}/tools")
    assert response.status_code == 200, response.text
    return {tool["name"]: tool for tool in response.json()}


async def attach(client: httpx.AsyncClient, agent_id: str, tool_id: str) -> None:
    response = await client.patch(f"/v1/agents/{agent_id}/tools/attach/{tool_id}")
    assert response.status_code == 200, response.text
