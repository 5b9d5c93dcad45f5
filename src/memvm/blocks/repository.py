"""All block SQL."""

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import Select, and_, bindparam, delete, func, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.db.dml import rows_affected
from memvm.db.pagination import NamePage, fetch_names
from memvm.orm import AgentBlock, Block, BlockChange

_BY_ID = select(Block).where(Block.id == bindparam("block_id")).execution_options(populate_existing=True)  # built once


async def get(session: AsyncSession, block_id: str, *, lock: bool = False) -> Block | None:
    query = _BY_ID.with_for_update() if lock else _BY_ID
    return await session.scalar(query, {"block_id": block_id})


_ATTACHED_AGENT_IDS = select(AgentBlock.agent_id).where(AgentBlock.block_id == bindparam("block_id"))  # every block write


async def attached_agent_ids(session: AsyncSession, block_id: str) -> list[str]:
    return list(await session.scalars(_ATTACHED_AGENT_IDS, {"block_id": block_id}))


async def agents_with_label(session: AsyncSession, agent_ids: Sequence[str], label: str) -> list[str]:
    query = select(AgentBlock.agent_id).where(AgentBlock.agent_id.in_(agent_ids), AgentBlock.label == label)
    return list(await session.scalars(query))


def list_query(
    *, label: str | None, tags: Sequence[str], match_all_tags: bool, value_search: str | None, among: Select[tuple[str]] | None
) -> Select[Block]:
    query = select(Block) if among is None else select(Block).where(Block.id.in_(among))
    if label is not None:
        query = query.where(Block.label == label)
    if tags:
        query = query.where(Block.tags.contains(list(tags)) if match_all_tags else Block.tags.overlap(list(tags)))
    if value_search:
        query = query.where(Block.value.icontains(value_search, autoescape=True))
    return query


def record_change(session: AsyncSession, block: Block, *, change: str, actor: Actor, restored_version: int | None = None) -> None:
    session.add(
        BlockChange(
            block_id=block.id,
            version=block.version,
            change=change,
            actor_type=actor.type,
            actor_id=actor.id,
            step_id=actor.step_id,
            run_id=actor.run_id,
            tool_call_id=actor.tool_call_id,
            restored_version=restored_version,
            label=block.label,
            value=block.value,
            char_limit=block.char_limit,
            description=block.description,
            read_only=block.read_only,
            metadata_=block.metadata_,
        )
    )


async def history_rows(
    session: AsyncSession, block_id: str, *, limit: int, before: int | None, since: int | None
) -> list[BlockChange]:
    """Up to `limit` changes newest first, versions below `before` and from `since` up (inclusive)."""
    query = select(BlockChange).where(BlockChange.block_id == block_id)
    if before is not None:
        query = query.where(BlockChange.version < before)
    if since is not None:
        query = query.where(BlockChange.version >= since)
    return list(await session.scalars(query.order_by(BlockChange.version.desc()).limit(limit)))


async def changes_after(session: AsyncSession, after: Mapping[str, int]) -> list[BlockChange]:
    """Each block's changes past the version given for it, oldest first (creation time, then id)."""
    if not after:
        return []
    past = [and_(BlockChange.block_id == block_id, BlockChange.version > version) for block_id, version in after.items()]
    query = select(BlockChange).where(or_(*past)).order_by(BlockChange.created_at, BlockChange.id)
    return list(await session.scalars(query))


async def change_at(session: AsyncSession, block_id: str, version: int) -> BlockChange | None:
    query = select(BlockChange).where(BlockChange.block_id == block_id, BlockChange.version == version)
    return await session.scalar(query.order_by(BlockChange.id.desc()).limit(1))


async def change_kinds(session: AsyncSession, block_id: str) -> list[tuple[int, str]]:
    """(version, change) of every kept change, oldest first: what undo and redo replay."""
    query = select(BlockChange.version, BlockChange.change).where(BlockChange.block_id == block_id)
    return [(version, change) for version, change in await session.execute(query.order_by(BlockChange.version))]


async def prune_history(session: AsyncSession, *, keep_versions: int | None, older_than: datetime | None) -> int:
    """Drop changes beyond the newest `keep_versions` of each block, and changes older than
    `older_than` except each live block's current version (a deleted block's history goes whole)."""
    pruned = 0
    # By each row's whole key, organization first: it runs across organizations, and the keys lead with it.
    key = (BlockChange.organization_id, BlockChange.id)
    if keep_versions is not None:
        of_block = (BlockChange.organization_id, BlockChange.block_id)
        rank = func.row_number().over(partition_by=of_block, order_by=BlockChange.version.desc()).label("rank")
        ranked = select(*key, rank).subquery()
        stale = select(ranked.c.organization_id, ranked.c.id).where(ranked.c.rank > keep_versions)
        pruned += await rows_affected(session, delete(BlockChange).where(tuple_(*key).in_(stale)))
    if older_than is not None:
        current = (
            select(Block.id)
            .where(
                Block.organization_id == BlockChange.organization_id,
                Block.id == BlockChange.block_id,
                Block.version == BlockChange.version,
            )
            .exists()
        )
        old = delete(BlockChange).where(BlockChange.created_at < older_than, ~current)
        pruned += await rows_affected(session, old)
    return pruned


async def tags(session: AsyncSession, page: NamePage) -> list[str]:
    return await fetch_names(session, Block.tags, page)
