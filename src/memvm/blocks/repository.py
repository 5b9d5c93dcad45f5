"""All block SQL."""

from collections.abc import Sequence

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.orm import AgentBlock, Block, BlockChange


async def get(session: AsyncSession, block_id: str, *, lock: bool = False) -> Block | None:
    query = select(Block).where(Block.id == block_id).execution_options(populate_existing=True)
    if lock:
        query = query.with_for_update()
    return await session.scalar(query)


async def attached_agent_ids(session: AsyncSession, block_id: str) -> list[str]:
    rows = await session.scalars(select(AgentBlock.agent_id).where(AgentBlock.block_id == block_id))
    return list(rows)


async def agents_with_label(session: AsyncSession, agent_ids: Sequence[str], label: str) -> list[str]:
    query = select(AgentBlock.agent_id).where(AgentBlock.agent_id.in_(agent_ids), AgentBlock.label == label)
    return list(await session.scalars(query))


def list_query(*, label: str | None, tags: Sequence[str], match_all_tags: bool, value_search: str | None) -> Select[Block]:
    query = select(Block)
    if label is not None:
        query = query.where(Block.label == label)
    if tags:
        query = query.where(Block.tags.contains(list(tags)) if match_all_tags else Block.tags.overlap(list(tags)))
    if value_search:
        query = query.where(Block.value.icontains(value_search, autoescape=True))
    return query


def record_change(session: AsyncSession, block: Block, *, change: str, actor: Actor) -> None:
    session.add(
        BlockChange(
            block_id=block.id,
            version=block.version,
            change=change,
            actor_type=actor.type,
            actor_id=actor.id,
            step_id=actor.step_id,
            label=block.label,
            value=block.value,
            char_limit=block.char_limit,
            description=block.description,
            read_only=block.read_only,
            metadata_=block.metadata_,
        )
    )
