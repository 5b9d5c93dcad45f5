"""Letta's `message_buffer_autoclear`: an agent with it on carries no conversation in its context
window from one turn to the next. Core memory stays in the system prompt; the messages stay stored
and searchable (recall memory). Letta loads only the system message at the start of each turn; here
the window is emptied as each turn ends, so what is stored is what the next turn sees."""

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.conversations.thread import Thread
from memvm.messages import service as messages


async def clear_after_turn(session: AsyncSession, thread: Thread, stop_reason: str) -> None:
    """In the transaction that finishes the turn, however it ended. A turn stopped to wait for the
    client (requires_approval) keeps its window: the answer continues it and pairs with those calls."""
    if thread.agent.message_buffer_autoclear and stop_reason != "requires_approval":
        await messages.reset_context(session, thread.agent.id, thread.conversation_id)
