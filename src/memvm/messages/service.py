"""Conversation history and runs: reading it (agents/letta_messages.py shapes it as Letta messages),
moving messages out of the context window, and the run row of each turn. Callers have checked that
the agent exists."""

from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.errors import NotFound
from memvm.ids import new_id
from memvm.messages import repository
from memvm.orm import Message, Run
from memvm.prompts.service import recompile_agents


async def history_page(
    session: AsyncSession, agent_id: str, *, limit: int, order: Literal["asc", "desc"], before: str | None, after: str | None
) -> list[Message]:
    """A chronological page of the agent's history. `before`/`after` are message ids bounding the
    range in time; `order=desc` (default) takes the newest `limit` messages of that range."""
    bounds = {name: await _cursor(session, agent_id, name, value) for name, value in (("before", before), ("after", after))}
    return await repository.history_page(session, agent_id, limit=limit, newest_first=order == "desc", **bounds)


_IMPORTED_COLUMNS = (
    "role", "kind", "content", "reasoning", "tool_calls", "tool_call_id", "tool_name", "tool_status",
    "tool_stdout", "tool_stderr", "otid", "sender_id", "in_context", "created_at",
)  # fmt: skip


async def store_imported(session: AsyncSession, agent_id: str, rows: Sequence[dict[str, Any]]) -> None:
    """Append history brought from an agent file, in order; the embedding queue picks it up."""
    if rows:
        complete = [{"id": new_id("message"), "agent_id": agent_id} | {c: row.get(c) for c in _IMPORTED_COLUMNS} for row in rows]
        await repository.insert_rows(session, complete)


async def history(session: AsyncSession, agent_id: str) -> list[Message]:
    """Every stored message of the agent, oldest first."""
    return await repository.all_of(session, agent_id)


async def get_message(session: AsyncSession, message_id: str) -> Message:
    message = await session.get(Message, message_id)
    if message is None:
        raise NotFound(f"Message {message_id!r} not found.")
    return message


async def in_context(session: AsyncSession, agent_id: str) -> list[Message]:
    """The agent's context window in order: the running summary (if any) first, then by time."""
    return await repository.in_context(session, agent_id)


async def replace_with_summary(session: AsyncSession, agent_id: str, evicted: Sequence[Message], summary: str) -> None:
    """Move `evicted` out of the context window and put one summary message in their place."""
    await repository.evict(session, [message.id for message in evicted])
    session.add(Message(id=new_id("message"), agent_id=agent_id, role="user", kind="summary", content=summary, in_context=True))
    await session.flush()
    await recompile_agents(session, [agent_id])  # the recall count in <memory_metadata> changed


async def reset_context(session: AsyncSession, agent_id: str) -> None:
    """Empty the context window; the history stays stored and searchable."""
    await repository.evict_all(session, agent_id)
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
    """The run that stored an input message with this otid, and everything it stored."""
    original = await repository.by_otid(session, agent_id, otid)
    if original is None or original.run_id is None:
        return None
    run = await session.get_one(Run, original.run_id)
    return run, await repository.of_run(session, run.id)


async def _cursor(session: AsyncSession, agent_id: str, name: str, message_id: str | None) -> Message | None:
    if message_id is None:
        return None
    message = await session.get(Message, message_id)
    if message is None or message.agent_id != agent_id:
        raise NotFound(f"Cursor {name}={message_id!r} is not a message of agent {agent_id!r}.")
    return message
