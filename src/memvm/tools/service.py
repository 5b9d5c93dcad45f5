"""Tools as stored rows: the built-ins are synced at start-up and shared read-only; custom tools
belong to one organization and are made from Python source; agents attach and detach them."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, Select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.conflicts import flush_or_conflict
from memvm.db.pagination import PageRequest, fetch_page
from memvm.errors import Conflict, Forbidden, InvalidInput, NotFound
from memvm.ids import new_id
from memvm.orm import AgentTool, Tool
from memvm.tools import repository
from memvm.tools.builtin import BUILTIN_SPECS, DEFAULT_TOOLS, TOOL_TYPES
from memvm.tools.builtin_vectors import stored_vector_columns
from memvm.tools.schemas import ToolCreate, ToolUpdate
from memvm.tools.searchable import search_text
from memvm.tools.source_schema import derive_schema

CUSTOM_TOOL_TYPE = "custom"
MCP_TOOL_TYPE = "external_mcp"
_NAME_INDEX = "uq_tool_organization_id_name"


async def sync_builtin_tools(session: AsyncSession) -> None:
    """Insert or refresh the built-in tools whose stored rows differ from this code's (usually none: a
    start then costs one SELECT rather than an upsert per tool)."""
    stored = await repository.stored_builtins(session)
    for row in _builtin_rows():
        wanted = {column: row[column] for column in repository.BUILTIN_REFRESHED}
        if stored.get(row["name"]) != wanted:
            await repository.upsert_builtin(session, {"id": new_id("tool"), **row})


def _builtin_rows() -> list[dict[str, Any]]:
    rows = []
    for spec in BUILTIN_SPECS.values():
        schema = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
        tags = ["builtin"]
        searchable = search_text(spec.name, spec.description, schema, tags)
        rows.append(
            {
                "name": spec.name,
                "tool_type": TOOL_TYPES[spec.name],
                "description": spec.description,
                "json_schema": schema,
                "tags": tags,
                "search_text": searchable,
                **stored_vector_columns(searchable),
            }
        )
    return rows


@dataclass(frozen=True)
class ToolFilter:
    """GET /v1/tools/ filters, as the SDK sends them."""

    names: Sequence[str] = ()
    tool_types: Sequence[str] = ()
    exclude_tool_types: Sequence[str] = ()
    search: str | None = None

    def query(self) -> Select[Tool]:
        return repository.list_query(
            names=self.names, tool_types=self.tool_types, exclude_tool_types=self.exclude_tool_types, search=self.search
        )


async def list_tools(session: AsyncSession, page: PageRequest, tool_filter: ToolFilter) -> list[Tool]:
    return await fetch_page(session, tool_filter.query(), Tool, page)


async def count_tools(session: AsyncSession, tool_filter: ToolFilter) -> int:
    return await repository.count(session, tool_filter.query())


async def create_tool(session: AsyncSession, data: ToolCreate) -> Tool:
    """A custom tool of the caller's organization, its schema derived from the source unless given."""
    return await _create(session, data, _schema(data.source_code, data.json_schema))


async def _create(session: AsyncSession, data: ToolCreate, schema: dict[str, Any]) -> Tool:
    tool = Tool(id=new_id("tool"), tool_type=CUSTOM_TOOL_TYPE, tags=[], pip_requirements=[], metadata_={})
    _apply(tool, data, schema)
    session.add(tool)
    await flush_or_conflict(
        session, _NAME_INDEX, f"Your organization already has a tool named {tool.name!r}; PUT /v1/tools/ replaces it."
    )
    return tool


async def upsert_tool(session: AsyncSession, data: ToolCreate) -> Tool:
    """Create the tool, or replace the organization's tool of the same name."""
    schema = _schema(data.source_code, data.json_schema)
    existing = await repository.custom_by_name(session, schema["name"])
    if existing is None:
        return await _create(session, data, schema)
    if existing.mcp_server_id is not None:
        raise Conflict(f"{existing.name!r} is a tool of MCP server {existing.mcp_server_id!r}; name your function differently.")
    _apply(existing, data, schema)
    await session.flush()
    return existing


async def update_tool(session: AsyncSession, tool_id: str, data: ToolUpdate) -> Tool:
    tool = await _editable_tool(session, tool_id, data)
    schema = None
    if data.source_code is not None or data.json_schema is not None:
        schema = _schema(data.source_code or tool.source_code or "", data.json_schema)
    _apply(tool, data, schema)
    await flush_or_conflict(session, _NAME_INDEX, f"Your organization already has a tool named {tool.name!r}.")
    return tool


async def delete_tool(session: AsyncSession, tool_id: str) -> None:
    """Delete a custom tool; it is detached from every agent."""
    await session.delete(await _custom_tool(session, tool_id))
    await session.flush()


async def _custom_tool(session: AsyncSession, tool_id: str) -> Tool:
    tool = await get_tool(session, tool_id)
    if tool.organization_id is None:
        raise Forbidden(f"Tool {tool.name!r} is built in: it is shared by every organization and cannot be changed.")
    return tool


async def _editable_tool(session: AsyncSession, tool_id: str, data: ToolUpdate) -> Tool:
    """An MCP server's tool takes its name, schema and code from the server: only the settings
    around it (limits, approval, tags, metadata) change here."""
    tool = await _custom_tool(session, tool_id)
    if tool.mcp_server_id is not None and (data.source_code is not None or data.json_schema is not None):
        raise InvalidInput(
            f"Tool {tool.name!r} comes from an MCP server: its schema changes with the server's "
            f"(PATCH /v1/mcp-servers/{tool.mcp_server_id}/refresh)."
        )
    return tool


def mcp_tool(server_id: str, server_name: str, name: str, description: str, parameters: dict[str, Any]) -> Tool:
    """A new row for one tool of an MCP server (the caller adds it); it runs on that server."""
    tool = Tool(
        id=new_id("tool"),
        name=name,
        tool_type=MCP_TOOL_TYPE,
        mcp_server_id=server_id,
        pip_requirements=[],
        metadata_={},
    )
    set_mcp_tool(tool, server_name, description, parameters)
    return tool


def set_mcp_tool(tool: Tool, server_name: str, description: str, parameters: dict[str, Any]) -> bool:
    """Give the row the server's current description and schema; whether anything changed."""
    schema = {"name": tool.name, "description": description, "parameters": parameters}
    tags = [f"mcp:{server_name}"]
    metadata = {**tool.metadata_, "mcp": {"server_name": server_name, "server_id": tool.mcp_server_id}}
    if (tool.description, tool.json_schema, tool.tags, tool.metadata_) == (description, schema, tags, metadata):
        return False
    tool.description, tool.json_schema, tool.tags, tool.metadata_ = description, schema, tags, metadata
    _refresh_search_text(tool)
    return True


async def mcp_server_tools(session: AsyncSession, server_id: str) -> list[Tool]:
    return await repository.of_mcp_server(session, server_id)


def _apply(tool: Tool, data: ToolCreate | ToolUpdate, schema: dict[str, Any] | None) -> None:
    """Set the given fields; a new `schema` (from new source or json_schema) sets the name and
    description too."""
    if schema is not None:
        tool.source_code = data.source_code or tool.source_code
        tool.name, tool.json_schema = schema["name"], schema
        tool.description = data.description or str(schema.get("description") or "")
    elif data.description is not None:
        tool.description = data.description
    for field in ("args_json_schema", "return_char_limit", "tags", "default_requires_approval", "enable_parallel_execution"):
        value = getattr(data, field)
        if value is not None:
            setattr(tool, field, value)
    if data.metadata is not None:
        tool.metadata_ = data.metadata
    if data.pip_requirements is not None:
        tool.pip_requirements = [requirement.model_dump(exclude_none=True) for requirement in data.pip_requirements]
    tool.source_type = "python"
    _refresh_search_text(tool)


def _refresh_search_text(tool: Tool) -> None:
    """A changed search text drops the tool's vector (and any claim on it), so the embedding queue
    embeds the new text and a vector of the old one, still being computed, is not stored."""
    text = search_text(tool.name, tool.description, tool.json_schema, tool.tags)
    if text != tool.search_text:
        tool.search_text = text
        tool.embedding = tool.embedding_model = tool.embedding_dim = tool.embed_claimed_at = None
        tool.embed_attempts = 0


def check_custom_tool(data: ToolCreate) -> dict[str, Any]:
    """The JSON schema the tool would get; raises what creating it would raise (no I/O)."""
    return _schema(data.source_code, data.json_schema)


def _schema(source_code: str, given: dict[str, Any] | None) -> dict[str, Any]:
    """The given JSON schema (checked for a usable name and parameters), or one derived from the source."""
    if given is None:
        schema = derive_schema(source_code)
    else:
        schema = given["function"] if isinstance(given.get("function"), dict) else given  # {"type": "function", ...}
        if not isinstance(schema.get("name"), str) or not isinstance(schema.get("parameters", {}), dict):
            raise InvalidInput("json_schema needs a string `name` and an object `parameters`, as OpenAI function schemas have.")
        derive_schema(source_code, name=schema["name"])  # the source must define the function it describes
    if schema["name"] in BUILTIN_SPECS:
        raise Conflict(f"{schema['name']!r} is the name of a built-in tool; name your function differently.")
    return schema


async def get_tool(session: AsyncSession, tool_id: str) -> Tool:
    tool = await repository.get(session, tool_id)
    if tool is None:
        raise _tool_not_found(tool_id)
    return tool


def _tool_not_found(tool_id: str) -> NotFound:
    return NotFound(f"Tool {tool_id!r} not found.")


async def tools_by_name(session: AsyncSession, names: Sequence[str]) -> list[Tool]:
    """The tools `names` names, in that order; a name that is neither built-in nor the organization's is a 400."""
    found = await tools_named(session, names)
    _check_names_found(names, found.keys())
    return [found[name] for name in names]


def _check_names_found(names: Sequence[str], found: Collection[str]) -> None:
    missing = [name for name in names if name not in found]
    if missing:
        known = ", ".join(sorted(BUILTIN_SPECS))
        raise InvalidInput(f"Tools not found by name: {', '.join(missing)}. Available tools: {known}.")


async def tools_named(session: AsyncSession, names: Sequence[str]) -> dict[str, Tool]:
    """The built-in and organization tools among `names`, by name (absent names are left out)."""
    if not names:
        return {}
    return {tool.name: tool for tool in await repository.by_names(session, names)}


def default_tool_names(agent_type: str) -> tuple[str, ...]:
    return DEFAULT_TOOLS.get(agent_type, ())


async def agent_tools(session: AsyncSession, agent_id: str) -> list[Tool]:
    """The agent's tools in the order they were attached."""
    return (await repository.of_agents(session, [agent_id]))[agent_id]


async def shown_tools_of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Row[Any]]]:
    """What each agent's view shows of its tools (ToolRead.of reads the rows), in attachment order."""
    return await repository.shown_of_agents(session, agent_ids)


async def attach_tools(session: AsyncSession, agent_id: str, tools: Sequence[Tool]) -> None:
    """Attach in order, skipping tools already attached."""
    attached = {tool.id for tool in await agent_tools(session, agent_id)}
    for tool in tools:
        if tool.id not in attached:
            session.add(AgentTool(agent_id=agent_id, tool_id=tool.id))
            attached.add(tool.id)
    await session.flush()  # one multi-row INSERT; `position` follows the order added (as for blocks)


# A new agent's tools are linked in the statement that stores it (agents/repository.py): the link
# (its `tool_id` and `position`) and its parameters; `check_chosen` then checks what it linked.
LINKED_CHOSEN = repository.LINKED_CHOSEN
chosen_link_parameters = repository.chosen_link_parameters


def check_chosen(names: Sequence[str], tool_ids: Sequence[str], linked: list[Tool]) -> list[Tool]:
    """`linked`, the tools linked for `names` and `tool_ids`: an unknown name is a 400 and an unknown
    id a 404, as `tools_by_name` and `get_tool` answer them (the caller's transaction takes the links back)."""
    _check_names_found(names, {tool.name for tool in linked})
    linked_ids = {tool.id for tool in linked}
    if missing := next((tool_id for tool_id in tool_ids if tool_id not in linked_ids), None):
        raise _tool_not_found(missing)
    return linked


async def attach_builtins(session: AsyncSession, agent_id: str, names: Sequence[str]) -> None:
    """Attach these built-in tools, skipping those the agent has."""
    await attach_tools(session, agent_id, await tools_by_name(session, names))


async def detach_builtins(session: AsyncSession, agent_id: str, names: Sequence[str]) -> None:
    """Detach those of these built-in tools the agent has."""
    for tool in await agent_tools(session, agent_id):
        if tool.name in names and tool.organization_id is None:
            await repository.detach(session, agent_id, tool.id)


async def detach_tool(session: AsyncSession, agent_id: str, tool_id: str) -> None:
    if await repository.detach(session, agent_id, tool_id) == 0:
        raise NotFound(f"Tool {tool_id!r} is not attached to agent {agent_id!r}.")
