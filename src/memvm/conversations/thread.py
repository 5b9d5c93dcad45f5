"""Where a turn runs: the agent and, unless it is the agent's default conversation, one of its
conversations. What differs between the two lives here, so the loop asks one object."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents import service as agents
from memvm.conversations import repository
from memvm.errors import InvalidInput
from memvm.ids import is_valid_id
from memvm.orm import Agent, Conversation
from memvm.threads import DEFAULT_CONVERSATION, describe


@dataclass
class Thread:
    agent: Agent
    conversation: Conversation | None = None  # None: the agent's default conversation

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation is not None else None

    @property
    def api_id(self) -> str:
        """How the API names it: the conversation's id, or `default`."""
        return self.conversation_id or DEFAULT_CONVERSATION

    @property
    def name(self) -> str:
        return describe(self.agent.id, self.conversation_id)

    @property
    def pending_approval(self) -> dict[str, Any] | None:
        """The tool calls this conversation's last turn stopped on, waiting for the client."""
        return self.agent.pending_approval if self.conversation is None else self.conversation.pending_approval

    async def set_pending_approval(self, session: AsyncSession, pending: dict[str, Any] | None) -> None:
        if self.conversation is None:
            await agents.set_pending_approval(session, self.agent, pending)
        else:
            await repository.set_pending_approval(session, self.conversation, pending)


@dataclass(frozen=True)
class ThreadRef:
    """What a request names, before it is looked up: a conversation id, or the default
    conversation of `agent_id`. Its lock key needs no lookup, so a turn can lock before reading."""

    conversation_id: str | None  # None: the default conversation of agent_id
    agent_id: str | None = None

    @classmethod
    def of(cls, conversation_id: str, agent_id: str | None = None) -> "ThreadRef":
        """From the API's naming: `default` (with the agent's id), an agent's id, or a conversation's."""
        if is_valid_id("agent", conversation_id):
            if agent_id is not None and agent_id != conversation_id:
                raise InvalidInput(f"{conversation_id!r} names another agent's default conversation than agent_id {agent_id!r}.")
            return cls(None, conversation_id)
        if conversation_id != DEFAULT_CONVERSATION:
            return cls(conversation_id, agent_id)
        if agent_id is None:
            raise InvalidInput("The `default` conversation is the agent's own history: pass its `agent_id` too.")
        return cls(None, agent_id)

    @classmethod
    def default_of(cls, agent_id: str) -> "ThreadRef":
        return cls(None, agent_id)

    @property
    def lock_key(self) -> str:
        """Turns of one conversation are serialised; the default conversation keeps the agent's key."""
        return self.conversation_id or self.agent_id or ""
