"""All conversation SQL."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.conversations.schemas import ArchiveStatus, ConversationOrder
from memvm.orm import Block, Conversation, ConversationBlock


async def get(session: AsyncSession, conversation_id: str, *, lock: bool = False) -> Conversation | None:
    query = select(Conversation).where(Conversation.id == conversation_id)
    return await session.scalar(query.with_for_update() if lock else query)


def _sort_key(order_by: ConversationOrder) -> ColumnElement[Any]:
    """What the listing sorts on; one never sent to (or never finished in) sorts by its creation."""
    if order_by == "created_at":
        return Conversation.created_at.expression
    return func.coalesce(getattr(Conversation, order_by), Conversation.created_at)


async def page(
    session: AsyncSession,
    *,
    agent_id: str | None,
    archive_status: ArchiveStatus,
    summary_search: str | None,
    order_by: ConversationOrder,
    descending: bool,
    after: Conversation | None,
    limit: int,
) -> list[Conversation]:
    """Listed conversations (hidden ones never), in the order asked, after the cursor."""
    key = _sort_key(order_by)
    query = select(Conversation).where(Conversation.hidden.is_(False))
    if agent_id is not None:
        query = query.where(Conversation.agent_id == agent_id)
    if archive_status != "all":
        archived = Conversation.archived_at.is_not(None)
        query = query.where(archived if archive_status == "archived" else ~archived)
    if summary_search:
        query = query.where(Conversation.summary.icontains(summary_search, autoescape=True))
    if after is not None:
        cursor = (await session.execute(select(key, Conversation.id).where(Conversation.id == after.id))).one()
        position = tuple_(key, Conversation.id)
        query = query.where(position < tuple_(*cursor) if descending else position > tuple_(*cursor))
    order = (key.desc(), Conversation.id.desc()) if descending else (key.asc(), Conversation.id.asc())
    return list(await session.scalars(query.order_by(*order).limit(limit)))


async def isolated_blocks(session: AsyncSession, conversation_ids: Sequence[str]) -> dict[str, list[Block]]:
    """Each conversation's own blocks, by conversation."""
    query = (
        select(ConversationBlock.conversation_id, Block)
        .join(Block, Block.id == ConversationBlock.block_id)
        .where(ConversationBlock.conversation_id.in_(conversation_ids))
        .order_by(ConversationBlock.label)
    )
    found: dict[str, list[Block]] = {conversation_id: [] for conversation_id in conversation_ids}
    for conversation_id, block in await session.execute(query):
        found[conversation_id].append(block)
    return found


async def isolated_block(session: AsyncSession, conversation_id: str, label: str, *, lock: bool) -> Block | None:
    query = (
        select(Block)
        .join(ConversationBlock, Block.id == ConversationBlock.block_id)
        .where(ConversationBlock.conversation_id == conversation_id, ConversationBlock.label == label)
    )
    return await session.scalar(query.with_for_update(of=Block) if lock else query)


def isolate(session: AsyncSession, conversation_id: str, blocks: Sequence[Block]) -> None:
    session.add_all(ConversationBlock(conversation_id=conversation_id, label=b.label, block_id=b.id) for b in blocks)


async def latest_isolated_change(session: AsyncSession, conversation_id: str) -> datetime | None:
    query = (
        select(func.max(Block.updated_at))
        .join(ConversationBlock, Block.id == ConversationBlock.block_id)
        .where(ConversationBlock.conversation_id == conversation_id)
    )
    return await session.scalar(query)


async def set_pending_approval(session: AsyncSession, conversation: Conversation, pending: dict[str, Any] | None) -> None:
    await session.execute(update(Conversation).where(Conversation.id == conversation.id).values(pending_approval=pending))
    conversation.pending_approval = pending


async def stamp(session: AsyncSession, conversation_id: str, column: str) -> None:
    """Set `last_message_at` or `last_run_completion` to now, without reading the row."""
    await session.execute(update(Conversation).where(Conversation.id == conversation_id).values({column: func.now()}))
