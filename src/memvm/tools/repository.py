"""All tool SQL."""

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, Select, String, any_, bindparam, delete, func, or_, select
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db import direct
from memvm.db.base import Base
from memvm.db.direct import ORGANIZATION, Direct
from memvm.db.dml import rows_affected
from memvm.db.tenancy import organization_of
from memvm.orm import AgentTool, Tool
from memvm.tools.schemas import SHOWN

# What a start refreshes of a built-in tool, and so what sync_builtin_tools compares.
BUILTIN_REFRESHED = ("description", "json_schema", "tool_type", "search_text")
_STORED_BUILTINS = select(Tool.name, *(Tool.__table__.c[column] for column in BUILTIN_REFRESHED)).where(
    Tool.organization_id.is_(None)
)


async def stored_builtins(session: AsyncSession) -> dict[str, dict[str, Any]]:
    """The built-in tools' stored columns that upsert_builtin refreshes, by name: one SELECT."""
    rows = await session.execute(_STORED_BUILTINS)
    return {row.name: {column: row._mapping[column] for column in BUILTIN_REFRESHED} for row in rows}


async def upsert_builtin(session: AsyncSession, row: dict[str, Any]) -> None:
    """Insert, or refresh the description, schema, type and search text of the built-in tool with this
    name (safe when several replicas start at once). A row that changed gets the row's vector (its
    shipped one, builtin_vectors.py), or without one is queued for a new vector; an unchanged one is
    not written at all, so its vector stays."""
    statement = insert(Tool).values(**row)
    excluded = statement.excluded
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[Tool.name],
            index_where=Tool.organization_id.is_(None),
            set_={
                **{column: excluded[column] for column in BUILTIN_REFRESHED},
                **{column: excluded[column] for column in ("embedding", "embedding_model", "embedding_dim")},
                "embed_claimed_at": None,
                "embed_attempts": 0,
            },
            where=or_(*(Tool.__table__.c[column].is_distinct_from(excluded[column]) for column in BUILTIN_REFRESHED)),
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


_NAMES = bindparam("names", type_=ARRAY(Tool.name.type))
_IDS = bindparam("ids", type_=ARRAY(Tool.id.type))
# The names' order, then the ids': a tool named and also given by id is linked once, where its name puts it.
_BY_NAME = func.array_position(_NAMES, Tool.name)
_CHOSEN_ORDER = func.coalesce(_BY_NAME, func.cardinality(_NAMES) + func.array_position(_IDS, Tool.id))
_CHOSEN = (
    select(bindparam("organization_id", type_=String), bindparam("agent_id", type_=String), Tool.id)
    .where(or_(Tool.name == func.any(_NAMES), Tool.id == func.any(_IDS)))
    .order_by(_CHOSEN_ORDER)
)
# Built once; a CTE of the statement that stores a new agent (agents/repository.py), which reads
# its `tool_id` and `position`.
LINKED_CHOSEN = (
    insert(AgentTool)
    .from_select([AgentTool.organization_id, AgentTool.agent_id, AgentTool.tool_id], _CHOSEN)
    .returning(AgentTool.tool_id, AgentTool.position)
    .cte("linked")
)


def chosen_link_parameters(session: AsyncSession, agent_id: str, names: Sequence[str], ids: Sequence[str]) -> dict[str, Any]:
    """LINKED_CHOSEN's parameters: link the tools with these names, then those with these ids, to
    the agent, in that order. A name or id matching no tool is left out (the caller compares). The
    statement must be an ORM statement, so the session scopes the tools it picks to the
    organization (db/tenancy.py); the links it inserts are stamped with it here, as no flush sees them."""
    organization_id = organization_of(session.sync_session)
    return {"organization_id": organization_id, "agent_id": agent_id, "names": list(names), "ids": list(ids)}


_OF_AGENTS = (  # read on every turn (an agent view reads _SHOWN_OF_AGENTS): built once, with bound parameters
    select(AgentTool.agent_id, Tool)
    .join(Tool, Tool.id == AgentTool.tool_id)
    .where(AgentTool.agent_id.in_(bindparam("agent_ids", expanding=True)))
    .order_by(AgentTool.agent_id, AgentTool.position)
)


# What an agent view shows of its tools (tools/schemas.py's SHOWN, under the ORM's attribute names), in
# attachment order: a direct statement (db/direct.py), rows instead of Tool objects.
_TOOLS, _TOOL_LINKS = (Base.metadata.tables[model.__tablename__] for model in (Tool, AgentTool))
_SHOWN_OF_AGENTS = Direct(
    select(_TOOL_LINKS.c.agent_id, *(_TOOLS.c[Tool.__mapper__.attrs[key].columns[0].name].label(key) for key in SHOWN))
    .join(_TOOLS, _TOOLS.c.id == _TOOL_LINKS.c.tool_id)
    .where(
        # the organization's tools and the shared ones (built-in), as the session scopes them (db/tenancy.py)
        or_(_TOOLS.c.organization_id == bindparam(ORGANIZATION), _TOOLS.c.organization_id.is_(None)),
        _TOOL_LINKS.c.organization_id == bindparam(ORGANIZATION),
        _TOOL_LINKS.c.agent_id == any_(bindparam("agent_ids", type_=ARRAY(String))),
    )
    .order_by(_TOOL_LINKS.c.agent_id, _TOOL_LINKS.c.position)
)


async def shown_of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Row[Any]]]:
    """Each agent's tools as its view shows them (rows of SHOWN), in attachment order, in one query."""
    by_agent: dict[str, list[Row[Any]]] = {agent_id: [] for agent_id in agent_ids}
    for row in await direct.run(session, _SHOWN_OF_AGENTS, {"agent_ids": list(agent_ids)}):
        by_agent[row.agent_id].append(row)
    return by_agent


async def of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Tool]]:
    """Each agent's tools in attachment order, in one query."""
    by_agent: dict[str, list[Tool]] = {agent_id: [] for agent_id in agent_ids}
    for agent_id, tool in await session.execute(_OF_AGENTS, {"agent_ids": list(agent_ids)}):
        by_agent[agent_id].append(tool)
    return by_agent


async def detach(session: AsyncSession, agent_id: str, tool_id: str) -> int:
    return await rows_affected(session, delete(AgentTool).where(AgentTool.agent_id == agent_id, AgentTool.tool_id == tool_id))
