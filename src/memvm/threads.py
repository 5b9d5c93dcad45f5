"""Which conversation of an agent a message or run belongs to. Domains take a `conversation_id`:
None is the agent's default conversation (its original history), a `conv-…` id one of its other
conversations, and ANY_CONVERSATION (where a reader allows it) every conversation of the agent."""

from typing import Final

ANY_CONVERSATION: Final = "*"  # never a conversation id (those are conv-<uuid4>)
DEFAULT_CONVERSATION: Final = "default"  # how the API names the default conversation


def describe(agent_id: str, conversation_id: str | None) -> str:
    """For messages: 'conversation conv-…', or 'the default conversation of agent agent-…'."""
    return f"conversation {conversation_id}" if conversation_id else f"the default conversation of agent {agent_id}"
