"""Conversations: creating, reading, changing and forking them, and resolving what a request
names (a conversation, or `default` with its agent) to a Thread. Callers hold the transaction."""

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.agents import service as agents
from memvm.blocks import service as blocks
from memvm.blocks.schemas import BlockCreate
from memvm.conversations import repository
from memvm.conversations.schemas import ArchiveStatus, ConversationCreate, ConversationOrder, ConversationRead, ConversationUpdate
from memvm.conversations.thread import Thread, ThreadRef
from memvm.errors import Conflict, InvalidInput, NotFound
from memvm.ids import is_valid_id, new_id
from memvm.messages import service as messages
from memvm.orm import Block, Conversation
from memvm.prompts.service import conversation_prompt, preview_prompt, recompile_agents


async def open_thread(session: AsyncSession, ref: ThreadRef, *, for_write: bool = False) -> Thread:
    """The agent and conversation a request names. `for_write`: an archived conversation is
    refused (archived conversations are read-only)."""
    if ref.conversation_id is None:
        return Thread(await agents.get_agent(session, ref.agent_id or ""))
    conversation = await get_conversation(session, ref.conversation_id)
    if ref.agent_id is not None and ref.agent_id != conversation.agent_id:
        raise InvalidInput(f"Conversation {conversation.id!r} belongs to agent {conversation.agent_id!r}, not {ref.agent_id!r}.")
    if for_write and conversation.archived_at is not None:
        raise Conflict(f"Conversation {conversation.id!r} is archived, so it is read-only; unarchive it first.")
    return Thread(await agents.get_agent(session, conversation.agent_id), conversation)


async def get_conversation(session: AsyncSession, conversation_id: str, *, lock: bool = False) -> Conversation:
    known = is_valid_id("conv", conversation_id)
    conversation = await repository.get(session, conversation_id, lock=lock) if known else None
    if conversation is None:
        raise NotFound(f"Conversation {conversation_id!r} not found.")
    return conversation


async def create_conversation(session: AsyncSession, agent_id: str, data: ConversationCreate, *, actor: Actor) -> Conversation:
    """A new, empty conversation of the agent; blocks named in `isolated_block_labels` are copied
    for it alone."""
    await agents.get_agent(session, agent_id)
    fields = data.model_dump(exclude={"isolated_block_labels"})
    conversation = Conversation(
        id=new_id("conv"), agent_id=agent_id, created_by_id=actor.id, last_updated_by_id=actor.id, **fields
    )
    session.add(conversation)
    await session.flush()
    await _isolate(session, conversation.id, agent_id, data.isolated_block_labels or [], actor)
    return conversation


async def _isolate(session: AsyncSession, conversation_id: str, agent_id: str, labels: Sequence[str], actor: Actor) -> None:
    originals = []
    for label in dict.fromkeys(labels):
        block = await agents.find_block(session, agent_id, label, lock=False)
        if block is None:
            known = ", ".join(sorted(await agents.block_labels(session, agent_id))) or "none"
            raise InvalidInput(f"isolated_block_labels: agent {agent_id!r} has no block labelled {label!r} (it has: {known}).")
        originals.append(block)
    await _copy_blocks(session, conversation_id, originals, actor)


async def _copy_blocks(session: AsyncSession, conversation_id: str, originals: Sequence[Block], actor: Actor) -> None:
    specs = [
        BlockCreate(
            label=b.label,
            value=b.value,
            limit=b.char_limit,
            description=b.description,
            read_only=b.read_only,
            metadata=b.metadata_,
        )
        for b in originals
    ]
    repository.isolate(session, conversation_id, await blocks.create_blocks(session, specs, actor=actor))
    await session.flush()


async def read(session: AsyncSession, conversation: Conversation, *, with_window: bool = False) -> ConversationRead:
    own = (await repository.isolated_blocks(session, [conversation.id]))[conversation.id]
    window = None
    if with_window:
        window = [m.id for m in await messages.in_context(session, conversation.agent_id, conversation.id)]
    return ConversationRead.of(conversation, [block.id for block in own], window)


async def list_conversations(
    session: AsyncSession,
    *,
    agent_id: str | None,
    archive_status: ArchiveStatus,
    summary_search: str | None,
    order_by: ConversationOrder,
    order: str,
    after: str | None,
    limit: int,
) -> list[ConversationRead]:
    if agent_id is not None:
        await agents.get_agent(session, agent_id)
    cursor = await get_conversation(session, after) if after is not None else None
    rows = await repository.page(
        session,
        agent_id=agent_id,
        archive_status=archive_status,
        summary_search=summary_search,
        order_by=order_by,
        descending=order == "desc",
        after=cursor,
        limit=limit,
    )
    own = await repository.isolated_blocks(session, [row.id for row in rows])
    return [ConversationRead.of(row, [block.id for block in own[row.id]]) for row in rows]


async def update_conversation(
    session: AsyncSession, conversation_id: str, data: ConversationUpdate, *, actor: Actor
) -> Conversation:
    """Only the fields sent change; `archived` sets or clears archived_at."""
    conversation = await get_conversation(session, conversation_id, lock=True)
    changes = data.model_dump(exclude_unset=True)
    if "archived" in changes:
        archived = changes.pop("archived")
        if bool(archived) != (conversation.archived_at is not None):
            conversation.archived_at = datetime.now(UTC) if archived else None
    for field, value in changes.items():
        setattr(conversation, field, value)
    conversation.last_updated_by_id = actor.id
    await session.flush()
    return conversation


async def delete_conversation(session: AsyncSession, conversation_id: str, *, actor: Actor) -> None:
    """The conversation with its messages, runs and isolated blocks; the agent's memory stays."""
    conversation = await get_conversation(session, conversation_id)
    for block in (await repository.isolated_blocks(session, [conversation.id]))[conversation.id]:
        await blocks.delete_block(session, block.id, actor=actor)
    await session.delete(conversation)
    await session.flush()


async def fork(session: AsyncSession, source: Thread, *, message_id: str | None, hidden: bool, actor: Actor) -> Conversation:
    """A new conversation holding a copy of the source's history up to and including `message_id`
    (all of it when None), its window as it was, its overrides and copies of its isolated blocks."""
    origin = source.conversation
    copied = ConversationCreate(
        summary=origin.summary if origin else None,
        description=origin.description if origin else None,
        model=origin.model if origin else None,
        model_settings=origin.model_settings if origin else None,
        context_window_limit=origin.context_window_limit if origin else None,
        hidden=hidden,
    )
    forked = await create_conversation(session, source.agent.id, copied, actor=actor)
    if origin is not None:
        await _copy_blocks(session, forked.id, (await repository.isolated_blocks(session, [origin.id]))[origin.id], actor)
    await messages.copy_history(session, source.agent.id, source.conversation_id, forked.id, up_to_message_id=message_id)
    return forked


async def system_prompt(session: AsyncSession, thread: Thread) -> str:
    """The prompt a turn of this thread starts with. The default conversation's is the agent's
    stored one; another conversation's is compiled now from the shared blocks as they are (its
    own copies where it isolated a label), stamped with the last change it shows."""
    if thread.conversation is None:
        return thread.agent.compiled_system
    own = (await repository.isolated_blocks(session, [thread.conversation.id]))[thread.conversation.id]
    changed = [thread.agent.system_compiled_at, *(block.updated_at for block in own)]
    return await conversation_prompt(session, thread.agent, thread.conversation.id, own, compiled_at=max(changed))


async def recompile(session: AsyncSession, thread: Thread, *, dry_run: bool) -> str:
    """The prompt the thread's next turn starts with. The default conversation's is the agent's,
    stored unless `dry_run`; another conversation's is compiled at each turn, so storing is moot."""
    if thread.conversation is None:
        if dry_run:
            return await preview_prompt(session, thread.agent, keep_timestamp=False)
        await recompile_agents(session, [thread.agent.id], keep_timestamp=False)
        return thread.agent.compiled_system
    return await system_prompt(session, thread)


async def find_block(
    session: AsyncSession, agent_id: str, conversation_id: str | None, label: str, *, lock: bool
) -> Block | None:
    """The block a memory tool edits in this conversation: its own copy of the label if it isolated
    one, else the agent's shared block."""
    if conversation_id is not None:
        own = await repository.isolated_block(session, conversation_id, label, lock=lock)
        if own is not None:
            return own
    return await agents.find_block(session, agent_id, label, lock=lock)


async def note_send(session: AsyncSession, thread: Thread) -> None:
    """A message was sent to the conversation (its `last_message_at`)."""
    if thread.conversation is not None:
        await repository.stamp(session, thread.conversation.id, "last_message_at")


async def note_run_end(session: AsyncSession, thread: Thread) -> None:
    """A run of the conversation finished (its `last_run_completion`)."""
    if thread.conversation is not None:
        await repository.stamp(session, thread.conversation.id, "last_run_completion")
