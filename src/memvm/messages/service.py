"""Conversation history and runs: reading it (agents/letta_messages.py shapes it as Letta messages),
moving messages out of the context window, and the run row of each turn. Callers have checked that
the agent exists."""

from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.pagination import PageRequest
from memvm.db.tenancy import owned
from memvm.errors import Conflict, NotFound
from memvm.ids import new_id
from memvm.messages import repository
from memvm.orm import Message, Run
from memvm.prompts.service import recompile_agents
from memvm.threads import describe


async def history_page(
    session: AsyncSession,
    agent_id: str,
    conversation_id: str | None,
    *,
    limit: int,
    order: Literal["asc", "desc"],
    before: str | None,
    after: str | None,
) -> list[Message]:
    """A chronological page of one conversation's history (None: the agent's default one).
    `before`/`after` are message ids bounding the range in time; `order=desc` (default) takes the
    newest `limit` messages of that range."""
    bounds = {
        name: await _cursor(session, agent_id, conversation_id, name, value)
        for name, value in (("before", before), ("after", after))
    }
    newest_first = order == "desc"
    return await repository.history_page(session, agent_id, conversation_id, limit=limit, newest_first=newest_first, **bounds)


async def organization_page(session: AsyncSession, conversation_id: str | None, page: PageRequest) -> list[Message]:
    """A page of the organization's messages, every agent's, in the page's order by time."""
    bounds = {}
    for name, message_id in (("before", page.before), ("after", page.after)):
        bounds[name] = None if message_id is None else await _message_cursor(session, name, message_id)
    return await repository.organization_page(
        session, conversation_id=conversation_id, limit=page.limit, ascending=page.order == "asc", **bounds
    )


async def _message_cursor(session: AsyncSession, name: str, message_id: str) -> Message:
    message = await owned(session, Message, message_id)
    if message is None:
        raise NotFound(f"{name}={message_id!r} does not match any message; pass the id of a message from a previous page.")
    return message


_IMPORTED_COLUMNS = (
    "role", "kind", "content", "reasoning", "tool_calls", "tool_call_id", "tool_name", "tool_status",
    "tool_stdout", "tool_stderr", "otid", "sender_id", "in_context", "created_at",
)  # fmt: skip


async def store_imported(session: AsyncSession, agent_id: str, rows: Sequence[dict[str, Any]]) -> None:
    """Append history brought from an agent file, in order; the embedding queue picks it up."""
    if rows:
        first = await repository.next_seq(session, agent_id, None)
        complete = [
            {"id": new_id("message"), "agent_id": agent_id, "seq": seq} | {c: row.get(c) for c in _IMPORTED_COLUMNS}
            for seq, row in enumerate(rows, start=first)
        ]
        await repository.insert_rows(session, complete)


async def history(session: AsyncSession, agent_id: str, conversation_id: str | None = None) -> list[Message]:
    """Every stored message of one conversation (None: the agent's default one), oldest first."""
    return await repository.all_of(session, agent_id, conversation_id)


async def get_message(session: AsyncSession, message_id: str) -> Message:
    message = await owned(session, Message, message_id)
    if message is None:
        raise NotFound(f"Message {message_id!r} not found.")
    return message


async def in_context(session: AsyncSession, agent_id: str, conversation_id: str | None = None) -> list[Message]:
    """A conversation's context window in order (None: the agent's default one): the running
    summary (if any) first, then by time."""
    return await repository.in_context(session, agent_id, conversation_id)


async def chat_window_since(
    session: AsyncSession, agent_id: str, conversation_id: str | None, known_seq: int
) -> Sequence[Row[Any]]:
    """in_context's messages after `known_seq`, only what the model reads of them (of one conversation, not
    ANY_CONVERSATION), and a check of those up to it (runtime/loop/kept_windows.py keeps them)."""
    return await repository.chat_window_since(session, agent_id, conversation_id, known_seq)


async def replace_with_summary(
    session: AsyncSession, agent_id: str, conversation_id: str | None, evicted: Sequence[Message], summary: str
) -> Message:
    """Move `evicted` out of the conversation's window and put one summary message in their place."""
    await repository.evict(session, [message.id for message in evicted])
    seq = await repository.next_seq(session, agent_id, conversation_id)
    row = Message(id=new_id("message"), seq=seq, agent_id=agent_id, conversation_id=conversation_id, role="user", kind="summary")
    row.content, row.in_context = summary, True
    session.add(row)
    await session.flush()
    await _recount(session, agent_id, conversation_id)
    return row


async def reset_context(session: AsyncSession, agent_id: str, conversation_id: str | None = None) -> None:
    """Empty a conversation's window; the history stays stored and searchable."""
    await repository.evict_all(session, agent_id, conversation_id)
    await _recount(session, agent_id, conversation_id)


async def copy_history(
    session: AsyncSession, agent_id: str, source: str | None, target: str, *, up_to_message_id: str | None
) -> int:
    """Fork: the source conversation's messages, up to and including `up_to_message_id` (all when
    None), copied into `target`. How many were copied."""
    up_to = await _cursor(session, agent_id, source, "message_id", up_to_message_id)
    return await repository.copy_into(session, agent_id, source, target, up_to=up_to)


async def _recount(session: AsyncSession, agent_id: str, conversation_id: str | None) -> None:
    """The default conversation's recall count is in the agent's stored prompt; another
    conversation's prompt is compiled at each of its turns."""
    if conversation_id is None:
        await recompile_agents(session, [agent_id])


async def queue_reembedding(session: AsyncSession, agent_id: str) -> None:
    """Drop the agent's message vectors so the embedding queue recomputes them with its new model."""
    await repository.queue_reembedding(session, agent_id)


async def pending_embeddings(session: AsyncSession, agent_id: str) -> int:
    return await repository.pending_embeddings(session, agent_id)


async def of_run(session: AsyncSession, run_id: str) -> list[Message]:
    """What a run stored, in order."""
    return await repository.of_run(session, run_id)


async def of_step(session: AsyncSession, step_id: str) -> list[Message]:
    return await repository.of_step(session, step_id)


async def run_of_otid(session: AsyncSession, agent_id: str, otid: str) -> tuple[Run, list[Message]] | None:
    """The run that stored an input message with this otid, and everything it stored. Conflict when
    that run was deleted: its outcome is gone, and running the send again would repeat its input."""
    original = await repository.by_otid(session, agent_id, otid)
    if original is None or original.run_id is None:
        return None
    run = await session.get(Run, (original.organization_id, original.run_id))
    if run is None:
        raise Conflict(
            f"otid {otid!r} was already sent, by run {original.run_id!r}, which has since been deleted "
            "(its messages stay in the conversation). Send again with a new otid to run a new turn."
        )
    return run, await repository.of_run(session, run.id)


async def _cursor(
    session: AsyncSession, agent_id: str, conversation_id: str | None, name: str, message_id: str | None
) -> Message | None:
    if message_id is None:
        return None
    message = await owned(session, Message, message_id)
    if message is None or message.agent_id != agent_id or message.conversation_id != conversation_id:
        raise NotFound(f"{name}={message_id!r} is not a message of {describe(agent_id, conversation_id)}.")
    return message
