"""Tools as stored rows: the built-ins are synced at start-up; agents attach and detach them."""

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.pagination import PageRequest, fetch_page
from memvm.errors import InvalidInput, NotFound
from memvm.ids import new_id
from memvm.orm import AgentTool, Tool
from memvm.tools import repository
from memvm.tools.builtin import BUILTIN_SPECS, DEFAULT_TOOLS, TOOL_TYPES


async def sync_builtin_tools(session: AsyncSession) -> None:
    """Insert or refresh every built-in tool by name."""
    for spec in BUILTIN_SPECS.values():
        schema = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
        await repository.upsert_by_name(
            session,
            {
                "id": new_id("tool"),
                "name": spec.name,
                "tool_type": TOOL_TYPES[spec.name],
                "description": spec.description,
                "json_schema": schema,
                "tags": ["builtin"],
            },
        )


async def list_tools(session: AsyncSession, page: PageRequest, *, name: str | None = None) -> list[Tool]:
    return await fetch_page(session, repository.list_query(name=name), Tool, page)


async def get_tool(session: AsyncSession, tool_id: str) -> Tool:
    tool = await repository.get(session, tool_id)
    if tool is None:
        raise NotFound(f"Tool {tool_id!r} not found.")
    return tool


async def tools_by_name(session: AsyncSession, names: Sequence[str]) -> list[Tool]:
    found = {tool.name: tool for tool in await repository.by_names(session, names)}
    missing = [name for name in names if name not in found]
    if missing:
        known = ", ".join(sorted(BUILTIN_SPECS))
        raise InvalidInput(f"Tools not found by name: {', '.join(missing)}. Available tools: {known}.")
    return [found[name] for name in names]


def default_tool_names(agent_type: str) -> tuple[str, ...]:
    return DEFAULT_TOOLS.get(agent_type, ())


async def agent_tools(session: AsyncSession, agent_id: str) -> list[Tool]:
    """The agent's tools in the order they were attached."""
    return await repository.of_agent(session, agent_id)


async def attach_tools(session: AsyncSession, agent_id: str, tools: Sequence[Tool]) -> None:
    """Attach in order, skipping tools already attached."""
    attached = {tool.id for tool in await agent_tools(session, agent_id)}
    for tool in tools:
        if tool.id not in attached:
            session.add(AgentTool(agent_id=agent_id, tool_id=tool.id))
            attached.add(tool.id)
            await session.flush()


async def detach_tool(session: AsyncSession, agent_id: str, tool_id: str) -> None:
    if await repository.detach(session, agent_id, tool_id) == 0:
        raise NotFound(f"Tool {tool_id!r} is not attached to agent {agent_id!r}.")
