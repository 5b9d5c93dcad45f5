"""Compaction: summarize the oldest in-context messages with the model, keep the recent tail.
Evicted messages leave the window but stay stored (recall memory)."""

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.conversations.thread import Thread
from memvm.db.uow import transaction
from memvm.errors import LLMError
from memvm.llm.types import ChatMessage, ModelRequest, ToolSpec
from memvm.messages import service as messages
from memvm.orm import Message
from memvm.runtime.loop.conversation import summary_text, to_chat
from memvm.runtime.loop.models import AgentModel
from memvm.runtime.loop.tokens import estimate_message, estimate_text, estimate_tools
from memvm.runtime.loop.window import KEEP_SHARE, choose_cut

SUMMARIZER_INSTRUCTIONS = (
    "You compress conversation history for an AI agent whose context window is full. Write a concise summary of "
    "the messages below: facts learned about the user, decisions made, open tasks, and anything the agent will "
    "need later. Write it as notes to the agent itself. Do not invent anything."
)
# The transcript sent to the summarizer is clipped to stay well inside its own window.
TRANSCRIPT_CHAR_LIMIT = 50_000


class CompactionError(Exception):
    """Compaction could not make room; the turn must stop and say why."""


@dataclass(frozen=True)
class Compacted:
    summary: str
    messages_before: int
    messages_after: int
    window: list[Message]  # the conversation's window after it


def check_fixed_part(system_prompt: str, tools: Sequence[ToolSpec], context_window: int) -> None:
    """Compaction evicts messages only: the prompt and tool definitions must fit by themselves."""
    fixed = estimate_text(system_prompt) + estimate_tools(list(tools))
    if fixed >= context_window:
        raise CompactionError(
            f"The system prompt and tools alone take about {fixed} tokens, more than the context window of "
            f"{context_window}. Shorten memory blocks or raise the agent's context window."
        )


async def compact(
    sessionmaker: async_sessionmaker[AsyncSession],
    organization_id: str,
    thread: Thread,
    agent_model: AgentModel,
    *,
    force: bool = False,
) -> Compacted | None:
    """Evict the conversation's oldest messages so the rest fits in KEEP_SHARE of the window,
    replacing them with one summary message. `force` evicts every message. None if there is
    nothing to evict."""
    agent_id, conversation_id = thread.agent.id, thread.conversation_id
    async with transaction(sessionmaker, organization_id) as session:
        window = await messages.in_context(session, agent_id, conversation_id)
    keep_budget = 0 if force else int(agent_model.context_window * KEEP_SHARE)
    tokens = [estimate_message(to_chat(message)) for message in window]
    cut = choose_cut([m.role for m in window], tokens, keep_budget)
    if cut == 0:
        return None
    evicted = window[:cut]
    summary = await _summarize(agent_model, evicted)
    async with transaction(sessionmaker, organization_id) as session:
        text = summary_text(_evicted_count(evicted), summary)
        await messages.replace_with_summary(session, agent_id, conversation_id, evicted, text)
        after = await messages.in_context(session, agent_id, conversation_id)
    return Compacted(summary=summary, messages_before=len(window), messages_after=len(after), window=after)


def _evicted_count(evicted: Sequence[Message]) -> int:
    return sum(1 for message in evicted if message.kind != "summary")


async def _summarize(agent_model: AgentModel, evicted: Sequence[Message]) -> str:
    transcript = "\n".join(f"[{m.role}{'/' + m.kind if m.kind != 'message' else ''}] {_text_of(m)}" for m in evicted)
    request = ModelRequest(
        model=agent_model.name,
        messages=[ChatMessage("system", SUMMARIZER_INSTRUCTIONS), ChatMessage("user", transcript[-TRANSCRIPT_CHAR_LIMIT:])],
    )
    try:
        completion = await agent_model.model.complete(request)
    except LLMError as error:
        raise CompactionError(f"Summarizing old messages failed: {error.message}") from error
    summary = (completion.content or "").strip()
    if not summary:
        raise CompactionError("Summarizing old messages failed: the model returned an empty summary.")
    return summary


def _text_of(message: Message) -> str:
    calls = " ".join(f"{call['name']}({call['arguments']})" for call in message.tool_calls or ())
    return " ".join(part for part in (message.content or "", calls) if part)
