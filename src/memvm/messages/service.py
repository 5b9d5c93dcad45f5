"""Reading conversation history in the Letta message format."""

from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents import service as agents
from memvm.errors import NotFound
from memvm.messages import repository
from memvm.messages.letta_format import to_letta
from memvm.orm import Agent, Message


async def list_messages(
    session: AsyncSession,
    agent_id: str,
    *,
    limit: int,
    order: Literal["asc", "desc"],
    before: str | None,
    after: str | None,
    types: list[str] | None,
) -> list[dict[str, Any]]:
    """A chronological page of the agent's history. `before`/`after` are message ids bounding the
    range in time; `order=desc` (default) takes the newest `limit` messages of that range."""
    agent = await agents.get_agent(session, agent_id)
    bounds = {name: await _cursor(session, agent_id, name, value) for name, value in (("before", before), ("after", after))}
    rows = await repository.history_page(session, agent_id, limit=limit, newest_first=order == "desc", **bounds)
    letta = [item for row in rows for item in to_letta(row, agent_type=agent.agent_type)]
    return [item for item in letta if types is None or item["message_type"] in types]


async def get_message(session: AsyncSession, message_id: str) -> list[dict[str, Any]]:
    message = await session.get(Message, message_id)
    if message is None:
        raise NotFound(f"Message {message_id!r} not found.")
    agent = await session.get_one(Agent, message.agent_id)
    return to_letta(message, agent_type=agent.agent_type)


async def _cursor(session: AsyncSession, agent_id: str, name: str, message_id: str | None) -> Message | None:
    if message_id is None:
        return None
    message = await session.get(Message, message_id)
    if message is None or message.agent_id != agent_id:
        raise NotFound(f"Cursor {name}={message_id!r} is not a message of agent {agent_id!r}.")
    return message
