"""All tool SQL."""

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, bindparam, delete, func, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.dml import rows_affected
from memvm.orm import AgentTool, Tool

_BUILTIN_REFRESHED = ("description", "json_schema", "tool_type", "search_text")


async def upsert_builtin(session: AsyncSession, row: dict[str, Any]) -> None:
    """Insert, or refresh the description, schema, type and search text of the built-in tool with this
    name (safe when several replicas start at once). A row that changed is queued for a new vector;
    an unchanged one is not written at all, so its vector stays."""
    statement = insert(Tool).values(**row)
    excluded = statement.excluded
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[Tool.name],
            index_where=Tool.organization_id.is_(None),
            set_={
                **{column: excluded[column] for column in _BUILTIN_REFRESHED},
                "embedding": None,
                "embedding_model": None,
                "embedding_dim": None,
                "embed_claimed_at": None,
                "embed_attempts": 0,
            },
            where=or_(*(Tool.__table__.c[column].is_distinct_from(excluded[column]) for column in _BUILTIN_REFRESHED)),
        )
    )


def list_query(
    *, names: Sequence[str], tool_types: Sequence[str], exclude_tool_types: Sequence[str], search: str | None
) -> Select[Tool]:
    query = select(Tool)
    if names:
        query = query.where(Tool.name.in_(list(names)))
    if tool_types:
        query = query.where(Tool.tool_type.in_(list(tool_types)))
    if exclude_tool_types:
        query = query.where(Tool.tool_type.not_in(list(exclude_tool_types)))
    if search:
        query = query.where(Tool.name.icontains(search, autoescape=True))
    return query


async def count(session: AsyncSession, query: Select[Tool]) -> int:
    return await session.scalar(select(func.count()).select_from(query.subquery())) or 0


async def custom_by_name(session: AsyncSession, name: str) -> Tool | None:
    """The caller's organization's custom tool of this name (the session is scoped to it)."""
    return await session.scalar(select(Tool).where(Tool.name == name, Tool.organization_id.is_not(None)))


async def get(session: AsyncSession, tool_id: str) -> Tool | None:
    return await session.get(Tool, tool_id)


async def of_mcp_server(session: AsyncSession, server_id: str) -> list[Tool]:
    query = select(Tool).where(Tool.mcp_server_id == server_id).order_by(Tool.name)
    return list(await session.scalars(query.execution_options(populate_existing=True)))


async def by_names(session: AsyncSession, names: Sequence[str]) -> list[Tool]:
    return list(await session.scalars(select(Tool).where(Tool.name.in_(names))))


_OF_AGENTS = (  # read on every agent view and turn: built once, with bound parameters
    select(AgentTool.agent_id, Tool)
    .join(Tool, Tool.id == AgentTool.tool_id)
    .where(AgentTool.agent_id.in_(bindparam("agent_ids", expanding=True)))
    .order_by(AgentTool.agent_id, AgentTool.position)
)


async def of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Tool]]:
    """Each agent's tools in attachment order, in one query."""
    by_agent: dict[str, list[Tool]] = {agent_id: [] for agent_id in agent_ids}
    for agent_id, tool in await session.execute(_OF_AGENTS, {"agent_ids": list(agent_ids)}):
        by_agent[agent_id].append(tool)
    return by_agent


async def detach(session: AsyncSession, agent_id: str, tool_id: str) -> int:
    return await rows_affected(session, delete(AgentTool).where(AgentTool.agent_id == agent_id, AgentTool.tool_id == tool_id))
