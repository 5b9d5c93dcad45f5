"""All agent SQL."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Select, bindparam, delete, func, insert, join, select, true, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from memvm.blocks.service import NEW_BLOCK_WRITES, STORED_BLOCKS
from memvm.db import direct
from memvm.db.direct import ORGANIZATION, Direct
from memvm.db.pagination import NamePage, fetch_names
from memvm.db.tenancy import owned
from memvm.orm import Agent, AgentBlock, Block, Tool
from memvm.orm.agent_links import WITH_LINKS
from memvm.tools.service import LINKED_CHOSEN

# The hottest reads are built once, with bound parameters: building the expression per request
# showed in the profile.
_AGENT_BY_ID = select(Agent).where(Agent.id == bindparam("agent_id")).execution_options(populate_existing=True)
_BLOCK_BY_LABEL = (
    select(Block)
    .join(AgentBlock, AgentBlock.block_id == Block.id)
    .where(AgentBlock.agent_id == bindparam("agent_id"), AgentBlock.label == bindparam("label"))
    .execution_options(populate_existing=True)
)


async def get(session: AsyncSession, agent_id: str, *, lock: bool = False) -> Agent | None:
    query = _AGENT_BY_ID.with_for_update() if lock else _AGENT_BY_ID
    return await session.scalar(query, {"agent_id": agent_id})


_AGENT_TABLE = Agent.metadata.tables[Agent.__tablename__]
_EMBEDDING_OF = Direct(  # before every archival insert and search: a direct statement (db/direct.py)
    select(_AGENT_TABLE.c.embedding).where(
        _AGENT_TABLE.c.organization_id == bindparam(ORGANIZATION), _AGENT_TABLE.c.id == bindparam("agent_id")
    )
)


async def embedding_of(session: AsyncSession, agent_id: str) -> tuple[str | None] | None:
    """The agent's embedding handle, as a one-item row; None if there is no such agent."""
    row = (await direct.run(session, _EMBEDDING_OF, {"agent_id": agent_id})).first()
    return None if row is None else (row.embedding,)


async def get_with_links_and_blocks(session: AsyncSession, agent_id: str) -> list[tuple[Agent, Block | None]]:
    """The agent with whether it has folders, identities and runs on its row, once per block in
    prompt order (once with None if it has none); no rows if there is no such agent."""
    return [(agent, block) for agent, block in await session.execute(_AGENT_WITH_BLOCKS, {"agent_id": agent_id})]


def _listed() -> Select[Agent]:
    """Agents with their links; re-read even if already loaded, as a loaded row has no links."""
    return select(Agent).options(*WITH_LINKS).execution_options(populate_existing=True)


# GET /v1/agents/{id}, built once. Its prompt is not read: the view does not show it, and it would
# come again with every block's row.
_AGENT_WITH_BLOCKS = (
    _listed()
    .add_columns(Block)
    .outerjoin(AgentBlock, AgentBlock.agent_id == Agent.id)
    .outerjoin(Block, Block.id == AgentBlock.block_id)
    .where(Agent.id == bindparam("agent_id"))
    .order_by(AgentBlock.position)
    .options(defer(Agent.compiled_system, raiseload=True))
)


def list_query(
    *, name: str | None, query_text: str | None, tags: Sequence[str], match_all_tags: bool, among: Select[tuple[str]] | None
) -> Select[Agent]:
    query = _listed() if among is None else _listed().where(Agent.id.in_(among))
    if name is not None:
        query = query.where(Agent.name == name)
    if query_text:
        query = query.where(Agent.name.icontains(query_text, autoescape=True))
    if tags:
        query = query.where(Agent.tags.contains(list(tags)) if match_all_tags else Agent.tags.overlap(list(tags)))
    return query


async def tags(session: AsyncSession, page: NamePage) -> list[str]:
    return await fetch_names(session, Agent.tags, page)


async def agent_types(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, str]:
    rows = await session.execute(select(Agent.id, Agent.agent_type).where(Agent.id.in_(agent_ids)))
    return {agent_id: agent_type for agent_id, agent_type in rows}


def agents_of_block_query(block_id: str) -> Select[Agent]:
    return _listed().join(AgentBlock, AgentBlock.agent_id == Agent.id).where(AgentBlock.block_id == block_id)


async def attachment(session: AsyncSession, agent_id: str, block_id: str) -> AgentBlock | None:
    return await owned(session, AgentBlock, agent_id, block_id)


# A block's attachment and detachment, each run with the agent's new prompt in one statement
# (prompts.service.recompile_locked, which gives them `agent` and `organization`). Core: the session
# stamps and scopes only ORM rows and statements, so each names its organization itself.
_LINK_TABLE = AgentBlock.metadata.tables[AgentBlock.__tablename__]
_LINKS = _LINK_TABLE.c
LINK = (
    insert(_LINK_TABLE)
    .values(
        organization_id=bindparam("organization"),
        agent_id=bindparam("agent"),
        block_id=bindparam("block"),
        label=bindparam("block_label"),
    )
    .returning(_LINKS.agent_id)
)
UNLINK = (
    delete(_LINK_TABLE)
    .where(
        _LINKS.organization_id == bindparam("organization"),
        _LINKS.agent_id == bindparam("agent"),
        _LINKS.block_id == bindparam("block"),
    )
    .returning(_LINKS.agent_id)
)


def link_parameters(block: Block) -> dict[str, Any]:
    """The block's parameters of LINK and UNLINK."""
    return {"block": block.id, "block_label": block.label}


async def block_by_label(session: AsyncSession, agent_id: str, label: str) -> Block | None:
    return await session.scalar(_BLOCK_BY_LABEL, {"agent_id": agent_id, "label": label})


async def all_ids(session: AsyncSession) -> list[str]:
    return list(await session.scalars(select(Agent.id)))


async def labels_of(session: AsyncSession, agent_id: str) -> list[str]:
    return list(await session.scalars(select(AgentBlock.label).where(AgentBlock.agent_id == agent_id)))


async def detach_all_except(session: AsyncSession, agent_id: str, keep: Sequence[str]) -> None:
    await session.execute(delete(AgentBlock).where(AgentBlock.agent_id == agent_id, AgentBlock.block_id.not_in(keep)))


# Built once, as the hot reads above: a query built per attach cost more CPU than its round trip.
_LOCK_BLOCKS = (
    select(Block)
    .where(Block.id.in_(bindparam("block_ids", expanding=True)))
    .order_by(Block.id)
    .with_for_update(key_share=True, read=True)
    .execution_options(populate_existing=True)
)


async def lock_blocks(session: AsyncSession, block_ids: Sequence[str]) -> list[Block]:
    """Key-share lock: the blocks cannot be deleted or relabelled while we attach them.
    Taken before any agent row lock (blocks first, then agents, everywhere)."""
    return list(await session.scalars(_LOCK_BLOCKS, {"block_ids": list(block_ids)}))


_LOCKED_BLOCK_BY_LABEL = _BLOCK_BY_LABEL.with_for_update(of=Block)


async def lock_block_by_label(session: AsyncSession, agent_id: str, label: str) -> Block | None:
    """The agent's block with this label, row-locked for an edit (re-read under the lock, so an
    edit always applies to the latest value, never a stale snapshot)."""
    return await session.scalar(_LOCKED_BLOCK_BY_LABEL, {"agent_id": agent_id, "label": label})


async def set_pending_approval(session: AsyncSession, agent_id: str, pending: dict[str, Any] | None) -> None:
    await session.execute(update(Agent).where(Agent.id == agent_id).values(pending_approval=pending))


async def model_handles(session: AsyncSession) -> list[str]:
    return list(await session.scalars(select(Agent.model).where(Agent.model.is_not(None)).distinct().order_by(Agent.model)))


# A new agent's row, its new blocks, their history, its attachments and its tools' links, in one
# statement built once (its parameters: `new_agent_parameters`, blocks.service.new_block_parameters
# and tools.service.chosen_link_parameters). Nothing is read back: it answers with what the server
# stamps (the timestamps) and the tools it linked, in their order; the foreign keys between the rows
# are checked at its end, when all are in. Core for the agent, as for the blocks: the ORM's flush
# would take a statement of its own.
_STAMPED = frozenset({"created_at", "updated_at"})  # by the server's clock
_AGENT_ATTRIBUTES = {c.name: Agent.__mapper__.get_property_by_column(c).key for c in _AGENT_TABLE.c if c.name not in _STAMPED}
# Shared with the blocks' and the tools' writes; the other columns' parameters are `agent_<column>`.
_SHARED_PARAMETERS = {"organization_id": "organization_id", "id": "agent_id"}


def _parameter(column: str) -> str:
    return _SHARED_PARAMETERS.get(column, f"agent_{column}")


_NEW_AGENT = (
    insert(_AGENT_TABLE)
    .values({name: bindparam(_parameter(name), type_=_AGENT_TABLE.c[name].type) for name in _AGENT_ATTRIBUTES})
    .returning(_AGENT_TABLE.c.created_at, _AGENT_TABLE.c.updated_at)
    .cte("new_agent")
)
_BLOCK_TIMES = select(
    func.array_agg(STORED_BLOCKS.c.id).label("block_ids"),
    func.array_agg(STORED_BLOCKS.c.created_at).label("blocks_created_at"),
    func.array_agg(STORED_BLOCKS.c.updated_at).label("blocks_updated_at"),
).subquery("block_times")
_TOOLS = join(LINKED_CHOSEN, Tool, LINKED_CHOSEN.c.tool_id == Tool.id)
_CREATE = (  # one row per tool (one with no tool if none): the agent's and the blocks' times on each
    select(_NEW_AGENT.c.created_at, _NEW_AGENT.c.updated_at, *_BLOCK_TIMES.c, Tool)
    .select_from(_NEW_AGENT.join(_BLOCK_TIMES, true()).outerjoin(_TOOLS, true()))
    .add_cte(*NEW_BLOCK_WRITES)
    .order_by(LINKED_CHOSEN.c.position)
)


class Stored(NamedTuple):
    """What the server stamped on a new agent and its new blocks, and the tools it linked, in order."""

    created_at: datetime
    updated_at: datetime
    block_times: dict[str, tuple[datetime, datetime]]  # by block id: created_at, updated_at
    tools: list[Tool]


def new_agent_parameters(agent: Agent) -> dict[str, Any]:
    """The agent row's parameters of `insert_new` but its organization (the blocks' parameters name it)."""
    return {_parameter(name): getattr(agent, key) for name, key in _AGENT_ATTRIBUTES.items() if name != "organization_id"}


async def insert_new(session: AsyncSession, parameters: dict[str, Any]) -> Stored:
    rows = (await session.execute(_CREATE, parameters)).all()
    first = rows[0]
    created = zip(first.blocks_created_at or (), first.blocks_updated_at or (), strict=True)
    times = dict(zip(first.block_ids or (), created, strict=True))
    return Stored(first.created_at, first.updated_at, times, [row.Tool for row in rows if row.Tool is not None])
