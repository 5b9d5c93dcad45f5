"""Compiling and storing agents' system prompts; called in the same transaction as every
prompt-affecting change, so a stored prompt is never stale."""

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.memory.compiler import BlockView, RenderMode, compile_system_prompt
from memvm.memory.metadata import MemoryStats, render_memory_metadata
from memvm.archives.repository import stats as archive_stats
from memvm.messages.repository import recall_counts
from memvm.orm import Agent, AgentBlock, Block


def compile_agent_prompt(agent: Agent, blocks: Sequence[Block], stats: MemoryStats, *, compiled_at: datetime) -> str:
    views = [
        BlockView(label=b.label, value=b.value, limit=b.char_limit, description=b.description, read_only=b.read_only)
        for b in blocks
    ]
    metadata = render_memory_metadata(
        agent_id=agent.id, stats=stats, compiled_at=compiled_at, timezone=agent.timezone
    )
    return compile_system_prompt(
        system=agent.system, blocks=views, mode=RenderMode(agent.memory_render_mode), metadata=metadata
    )


async def attached_blocks(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Block]]:
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


async def recompile_agents(session: AsyncSession, agent_ids: Iterable[str], *, keep_timestamp: bool = False) -> None:
    """Lock the agents (in id order, so concurrent recompiles cannot deadlock), then compile
    from the blocks as they are now and store the result."""
    ids = sorted(set(agent_ids))
    if not ids:
        return
    locked = select(Agent).where(Agent.id.in_(ids)).order_by(Agent.id).with_for_update()
    agents = list(await session.scalars(locked.execution_options(populate_existing=True)))
    blocks = await attached_blocks(session, ids)
    stats = await memory_stats(session, ids)
    now = datetime.now(UTC)
    for agent in agents:
        compiled_at = agent.system_compiled_at if keep_timestamp else now
        agent.compiled_system = compile_agent_prompt(agent, blocks[agent.id], stats[agent.id], compiled_at=compiled_at)
        agent.system_compiled_at = compiled_at
    await session.flush()


async def preview_prompt(session: AsyncSession, agent: Agent, *, keep_timestamp: bool) -> str:
    """What a recompile would store now, without storing it."""
    blocks = await attached_blocks(session, [agent.id])
    stats = await memory_stats(session, [agent.id])
    compiled_at = agent.system_compiled_at if keep_timestamp else datetime.now(UTC)
    return compile_agent_prompt(agent, blocks[agent.id], stats[agent.id], compiled_at=compiled_at)


async def memory_stats(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, MemoryStats]:
    """Counts of what each agent has outside its prompt (never the content)."""
    recall = await recall_counts(session, agent_ids)
    stats = {}
    for agent_id in agent_ids:
        passages, tags = await archive_stats(session, agent_id)
        stats[agent_id] = MemoryStats(recall_messages=recall.get(agent_id, 0), archival_passages=passages, archival_tags=tags)
    return stats
