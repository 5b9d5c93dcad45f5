"""An agent's stored messages as the Letta messages clients read (`message_type` dicts).

How a stored message reads depends on its agent's type (MemGPT-style agents speak through
send_message), so every reader of stored history goes through `_reader`, the one place that looks
the type up. A run's and a step's messages read as their stream showed them, summaries included."""

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents import repository
from memvm.agents.service import get_agent
from memvm.db.pagination import PageRequest, page_of
from memvm.messages import service as messages
from memvm.messages.letta_format import to_letta
from memvm.orm import Message
from memvm.runs import service as runs

LettaMessages = list[dict[str, Any]]


async def of_agent(
    session: AsyncSession,
    agent_id: str,
    conversation_id: str | None = None,
    *,
    limit: int,
    order: Literal["asc", "desc"],
    before: str | None,
    after: str | None,
    types: Sequence[str] | None,
) -> LettaMessages:
    """A chronological page of one of the agent's conversations (messages.service.history_page; None:
    its default one), only the `message_type`s in `types` when given."""
    read = await _reader(session, agent_id)
    stored = await messages.history_page(session, agent_id, conversation_id, limit=limit, order=order, before=before, after=after)
    return [letta for letta in read(stored) if types is None or letta["message_type"] in types]


async def of_organization(
    session: AsyncSession, page: PageRequest, *, conversation_id: str | None, types: Sequence[str] | None
) -> LettaMessages:
    """A page of every agent's messages, each read in the way of its own agent's type."""
    stored = await messages.organization_page(session, conversation_id, page)
    agent_types = await repository.agent_types(session, sorted({message.agent_id for message in stored}))
    letta = [item for message in stored for item in to_letta(message, agent_type=agent_types[message.agent_id])]
    return [item for item in letta if types is None or item["message_type"] in types]


async def of_message(session: AsyncSession, message_id: str) -> LettaMessages:
    """One stored message, as the Letta messages it expands to (reasoning, tool calls, text)."""
    message = await messages.get_message(session, message_id)
    return (await _reader(session, message.agent_id))([message])


async def of_run(session: AsyncSession, run_id: str, page: PageRequest) -> LettaMessages:
    """A page of what the run stored (cursors are stored message ids)."""
    run = await runs.get_run(session, run_id)
    read = await _reader(session, run.agent_id, include_compaction=True)
    return read(page_of(await messages.of_run(session, run_id), page))


async def of_step(session: AsyncSession, step_id: str, page: PageRequest) -> LettaMessages:
    step = await runs.get_step(session, step_id)
    read = await _reader(session, step.agent_id, include_compaction=True)
    return read(page_of(await messages.of_step(session, step_id), page))


async def _reader(
    session: AsyncSession, agent_id: str, *, include_compaction: bool = False
) -> Callable[[Sequence[Message]], LettaMessages]:
    """Converts stored messages of this agent (an unknown agent is a NotFound, before any are read)."""
    agent = await get_agent(session, agent_id)
    convert = partial(to_letta, agent_type=agent.agent_type, include_compaction=include_compaction)
    return lambda stored: [letta for message in stored for letta in convert(message)]
