"""MCP servers as rows: their configuration and secrets, their health, and the tool rows their
`tools/list` becomes. Talking to a server is the runtime's (runtime/operations/mcp_servers.py):
no transaction is ever open while a server is reached.

Lock order, one for every path that changes a server's tools: the server row, then its tool rows."""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.conflicts import flush_or_conflict
from memvm.errors import InvalidInput, NotFound
from memvm.ids import new_id
from memvm.mcpclient.types import RemoteTool, ServerConfig
from memvm.mcpservers import repository
from memvm.mcpservers.schemas import (
    MASK,
    AnyConfig,
    McpServerCreate,
    McpServerUpdate,
    RefreshResult,
)
from memvm.orm import McpServer, Tool
from memvm.tools import service as tools
from memvm.tools.builtin import BUILTIN_SPECS

_NAME_CONSTRAINT = "uq_mcp_server_organization_id_server_name"
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what OpenAI-compatible models accept as a function name


def _name_taken(name: str) -> str:
    return f"Your organization already has an MCP server named {name!r}; choose another server_name."


async def create_server(session: AsyncSession, data: McpServerCreate) -> McpServer:
    server = McpServer(
        id=new_id("mcp_server"), server_name=data.server_name, status="unknown", args=[], network=False, secrets={}
    )
    _configure(server, data.config)
    session.add(server)
    await flush_or_conflict(session, _NAME_CONSTRAINT, _name_taken(data.server_name))
    return server


def _configure(server: McpServer, config: AnyConfig) -> None:
    """Set the fields the config gives; a masked secret sent back (as GET shows it) keeps the stored one."""
    server.server_type = config.mcp_server_type
    given = config.model_dump(exclude_unset=True, exclude={"mcp_server_type"})
    secrets = dict(server.secrets)
    for field in ("env", "custom_headers"):
        if field in given:
            stored = secrets.get(field) or {}
            secrets[field] = {
                name: stored.get(name, "") if value == MASK else value for name, value in (given[field] or {}).items()
            }
    if "auth_token" in given and given["auth_token"] != MASK:
        secrets["auth_token"] = given["auth_token"]
    server.secrets = secrets
    for field in ("command", "args", "network", "server_url", "auth_header"):
        if field in given and given[field] is not None:
            setattr(server, field, given[field])


async def list_servers(session: AsyncSession) -> list[McpServer]:
    return await repository.list_all(session)


async def get_server(session: AsyncSession, server_id: str, *, lock: bool = False) -> McpServer:
    server = await repository.get(session, server_id, lock=lock)
    if server is None:
        raise NotFound(f"MCP server {server_id!r} not found.")
    return server


async def update_server(session: AsyncSession, server_id: str, data: McpServerUpdate) -> tuple[McpServer, bool]:
    """The server changed, and whether how to reach it did (its session must then be replaced)."""
    server = await get_server(session, server_id, lock=True)
    if data.config.mcp_server_type != server.server_type:
        raise InvalidInput(
            f"MCP server {server.server_name!r} is a {server.server_type} server; its type cannot change "
            f"to {data.config.mcp_server_type} (create a new server instead)."
        )
    before = connection_of(server).fingerprint
    _configure(server, data.config)
    if data.server_name is not None and data.server_name != server.server_name:
        server.server_name = data.server_name
        for tool in await tools.mcp_server_tools(session, server.id):
            tools.set_mcp_tool(tool, server.server_name, tool.description, tool.json_schema.get("parameters") or {})
    await flush_or_conflict(session, _NAME_CONSTRAINT, _name_taken(server.server_name))
    return server, connection_of(server).fingerprint != before


async def delete_server(session: AsyncSession, server_id: str) -> None:
    """The server and its tools go; agents that had them attached lose them."""
    if await repository.remove(session, server_id) == 0:
        raise NotFound(f"MCP server {server_id!r} not found.")


def connection_of(server: McpServer) -> ServerConfig:
    secrets = server.secrets
    headers = dict(secrets.get("custom_headers") or {})
    if server.auth_header and secrets.get("auth_token"):
        headers[server.auth_header] = secrets["auth_token"]
    elif secrets.get("auth_token"):  # a token without a header name goes where bearer tokens go
        headers["Authorization"] = f"Bearer {secrets['auth_token']}"
    return ServerConfig(
        server_id=server.id,
        server_type=server.server_type,  # type: ignore[arg-type]  # the table's check constraint holds it to ServerType
        command=server.command,
        args=tuple(server.args),
        env=dict(secrets.get("env") or {}),
        network=server.network,
        url=server.server_url,
        headers=headers,
    )


@dataclass(frozen=True)
class ServerState:
    """What a turn needs of one server: how to reach it, and its recorded health (so that only a
    change of health is written)."""

    name: str
    config: ServerConfig
    status: str


async def servers_by_ids(session: AsyncSession, server_ids: Sequence[str]) -> list[McpServer]:
    """Those of these servers the organization has, by name."""
    return sorted(await repository.by_ids(session, server_ids), key=lambda server: server.server_name)


async def states_of(session: AsyncSession, server_ids: Sequence[str]) -> dict[str, ServerState]:
    return {
        server.id: ServerState(server.server_name, connection_of(server), server.status)
        for server in await repository.by_ids(session, server_ids)
    }


async def server_tools(session: AsyncSession, server_id: str) -> list[Tool]:
    await get_server(session, server_id)
    return await tools.mcp_server_tools(session, server_id)


async def server_tool(session: AsyncSession, server_id: str, tool_id: str) -> Tool:
    tool = await tools.get_tool(session, tool_id)
    if tool.mcp_server_id != server_id:
        raise NotFound(f"Tool {tool_id!r} is not a tool of MCP server {server_id!r}.")
    return tool


async def record_status(session: AsyncSession, server_id: str, error: str | None) -> None:
    await repository.set_status(session, server_id, error)


async def apply_tools(session: AsyncSession, server_id: str, remote: Sequence[RemoteTool]) -> RefreshResult:
    """Make the server's tool rows what its `tools/list` says: new tools added, changed ones
    updated, gone ones deleted (and so detached). A tool memvm cannot offer a model is skipped with
    the reason; so is one whose name another tool of the organization has."""
    server = await get_server(session, server_id, lock=True)
    stored = {tool.name: tool for tool in await tools.mcp_server_tools(session, server_id)}
    offered = {tool.name: tool for tool in remote}
    others = await tools.tools_named(session, [name for name in offered if name not in stored])
    result = RefreshResult(deleted=sorted(stored.keys() - offered.keys()), updated=[], added=[])
    for name in result.deleted:
        await session.delete(stored[name])
    for name, found in offered.items():
        parameters = _parameters(found.input_schema)
        if reason := _unusable(name, parameters, others.get(name)):
            result.skipped[name] = reason
        elif name in stored:
            if tools.set_mcp_tool(stored[name], server.server_name, found.description, parameters):
                result.updated.append(name)
        else:
            session.add(tools.mcp_tool(server.id, server.server_name, name, found.description, parameters))
            result.added.append(name)
    await session.flush()
    return result


def _parameters(input_schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's inputSchema as function parameters: an object schema, `properties` present."""
    return {"type": "object", "properties": {}, **input_schema} if isinstance(input_schema, dict) else {}


def _unusable(name: str, parameters: dict[str, Any], other: Tool | None) -> str | None:
    if not _TOOL_NAME.fullmatch(name):
        return "its name is not a valid function name for models (letters, digits, _ and -, at most 64)"
    if name in BUILTIN_SPECS:
        return "a built-in tool has this name"
    if other is not None:
        return f"your organization's tool {other.id} has this name"
    if parameters.get("type") != "object" or not isinstance(parameters.get("properties"), dict):
        return "its inputSchema is not a JSON object schema"
    return None
