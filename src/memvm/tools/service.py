"""Tools as stored rows: the built-ins are synced at start-up; agents attach and detach them."""

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.pagination import PageRequest, fetch_page
from memvm.errors import InvalidInput, NotFound
from memvm.ids import new_id
from memvm.orm import AgentTool, Tool
from memvm.tools.specs import BUILTIN_SPECS, DEFAULT_TOOLS, TOOL_TYPES


async def sync_builtin_tools(session: AsyncSession) -> None:
    """Insert or refresh every built-in tool by name (safe when several replicas start at once)."""
    for spec in BUILTIN_SPECS.values():
        schema = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
        row = {"id": new_id("tool"), "name": spec.name, "tool_type": TOOL_TYPES[spec.name], "description": spec.description,
               "json_schema": schema, "tags": ["builtin"]}
        statement = insert(Tool).values(**row)
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[Tool.name],
                set_={"description": statement.excluded.description, "json_schema": statement.excluded.json_schema,
                      "tool_type": statement.excluded.tool_type},
            )
        )


async def list_tools(session: AsyncSession, page: PageRequest, *, name: str | None = None) -> list[Tool]:
    query = select(Tool) if name is None else select(Tool).where(Tool.name == name)
    return await fetch_page(session, query, Tool, page)


async def get_tool(session: AsyncSession, tool_id: str) -> Tool:
    tool = await session.get(Tool, tool_id)
    if tool is None:
        raise NotFound(f"Tool {tool_id!r} not found.")
    return tool


async def tools_by_name(session: AsyncSession, names: Sequence[str]) -> list[Tool]:
    found = {tool.name: tool for tool in await session.scalars(select(Tool).where(Tool.name.in_(names)))}
    missing = [name for name in names if name not in found]
    if missing:
        known = ", ".join(sorted(BUILTIN_SPECS))
        raise InvalidInput(f"Tools not found by name: {', '.join(missing)}. Available tools: {known}.")
    return [found[name] for name in names]


def default_tool_names(agent_type: str) -> tuple[str, ...]:
    return DEFAULT_TOOLS.get(agent_type, ())


async def agent_tools(session: AsyncSession, agent_id: str) -> list[Tool]:
    query = select(Tool).join(AgentTool, AgentTool.tool_id == Tool.id).where(AgentTool.agent_id == agent_id)
    return list(await session.scalars(query.order_by(AgentTool.position)))


async def attach_tools(session: AsyncSession, agent_id: str, tools: Sequence[Tool]) -> None:
    """Attach in order, skipping tools already attached."""
    attached = {tool.id for tool in await agent_tools(session, agent_id)}
    for tool in tools:
        if tool.id not in attached:
            session.add(AgentTool(agent_id=agent_id, tool_id=tool.id))
            attached.add(tool.id)
            await session.flush()


async def detach_tool(session: AsyncSession, agent_id: str, tool_id: str) -> None:
    result = await session.execute(delete(AgentTool).where(AgentTool.agent_id == agent_id, AgentTool.tool_id == tool_id))
    if result.rowcount == 0:
        raise NotFound(f"Tool {tool_id!r} is not attached to agent {agent_id!r}.")
