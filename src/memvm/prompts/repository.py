"""The SQL that gathers a prompt's inputs: the agents (locked), their blocks in prompt order, and
the counts of what each agent keeps outside its prompt."""

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.orm import Agent, AgentArchive, AgentBlock, Block, Message, Passage

# <memory_metadata> lists at most this many distinct archival tags.
MAX_LISTED_TAGS = 100


async def lock_agents(session: AsyncSession, agent_ids: Sequence[str]) -> list[Agent]:
    """In id order, so concurrent recompiles of overlapping agent sets cannot deadlock. FOR NO KEY
    UPDATE (a recompile changes no key): it does not wait for the key-share locks that inserting a
    message takes on its agent, so a turn that stored its step's messages and then edits a shared
    block cannot deadlock with a block write recompiling that agent (blocks first, then agents)."""
    query = select(Agent).where(Agent.id.in_(agent_ids)).order_by(Agent.id).with_for_update(key_share=True)
    return list(await session.scalars(query.execution_options(populate_existing=True)))


async def blocks_in_prompt_order(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Block]]:
    """Blocks of each agent in attachment order, read fresh (not from the identity map)."""
    query = (
        select(AgentBlock.agent_id, Block)
        .join(Block, Block.id == AgentBlock.block_id)
        .where(AgentBlock.agent_id.in_(agent_ids))
        .order_by(AgentBlock.agent_id, AgentBlock.position)
        .execution_options(populate_existing=True)
    )
    by_agent: dict[str, list[Block]] = {agent_id: [] for agent_id in agent_ids}
    for agent_id, block in await session.execute(query):
        by_agent[agent_id].append(block)
    return by_agent


async def recall_counts(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, int]:
    """Messages stored but out of the context window, per agent."""
    query = (
        select(Message.agent_id, func.count())
        .where(Message.agent_id.in_(agent_ids), ~Message.in_context)
        .group_by(Message.agent_id)
    )
    return {agent_id: count for agent_id, count in await session.execute(query)}


async def archival_stats(session: AsyncSession, agent_id: str) -> tuple[int, tuple[str, ...]]:
    """Passage count and distinct tags over the agent's archives."""
    archive_ids = select(AgentArchive.archive_id).where(AgentArchive.agent_id == agent_id)
    in_archives = Passage.archive_id.in_(archive_ids)
    count = await session.scalar(select(func.count()).select_from(Passage).where(in_archives)) or 0
    if count == 0:
        return 0, ()
    all_tags = select(func.unnest(Passage.tags).label("tag")).where(in_archives).subquery()
    tags = await session.scalars(select(all_tags.c.tag).distinct().order_by(all_tags.c.tag).limit(MAX_LISTED_TAGS))
    return count, tuple(tags)
