"""The message rows a step stores around its tool results (the inputs and the assistant message
before them, the heartbeat after them), and what of them the client is shown."""

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from memvm.conversations.thread import Thread
from memvm.ids import new_id
from memvm.llm.types import Completion, ToolCall
from memvm.messages.letta_format import to_letta
from memvm.messages.schemas import MessageCreate, SendRequest
from memvm.orm import Message
from memvm.runtime.loop.approvals import WaitKind, calls_json
from memvm.runtime.loop.conversation import heartbeat_text


def row_base(thread: Thread, run_id: str, step_id: str | None = None) -> dict[str, str | None]:
    """The columns every row of a step shares."""
    base = {"agent_id": thread.agent.id, "conversation_id": thread.conversation_id, "run_id": run_id}
    return base | ({"step_id": step_id} if step_id else {})


def step_head(
    inputs: Sequence[MessageCreate],
    completion: Completion,
    waiting: Sequence[tuple[ToolCall, WaitKind]],
    base: dict[str, str | None],
    assistant_id: str | None,
) -> list[Message]:
    """The turn's input messages (first step only), then the assistant message. `assistant_id` is
    the id its tokens were already streamed under, if they were."""
    rows = [
        Message(id=new_id("message"), role=m.role, content=m.text, otid=m.otid, sender_id=m.sender_id, **base) for m in inputs
    ]
    assistant = Message(
        id=assistant_id or new_id("message"),
        role="assistant",
        content=completion.content,
        reasoning=completion.reasoning,
        tool_calls=calls_json(completion, waiting) or None,
        **base,
    )
    return [*rows, assistant]


def heartbeat(why: str, base: dict[str, str | None]) -> Message:
    """The user-role message that hands control back to the agent for another step."""
    return Message(
        id=new_id("message"), role="user", kind="heartbeat", content=heartbeat_text(why, datetime.now(UTC).isoformat()), **base
    )


def for_client(
    shown: Sequence[Message], request: SendRequest, agent_type: str, streamed_id: str | None = None
) -> Iterator[dict[str, Any]]:
    """The Letta messages of the types the send asked for, less the assistant message whose tokens
    were already streamed."""
    wanted, compaction = request.include_return_message_types, request.include_compaction_messages
    for message in shown:
        for letta in to_letta(message, agent_type=agent_type, include_compaction=compaction):
            already_streamed = letta["id"] == streamed_id and letta["message_type"] == "assistant_message"
            if (wanted is None or letta["message_type"] in wanted) and not already_streamed:
                yield letta
