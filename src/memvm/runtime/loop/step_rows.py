"""The message rows a step stores around its tool results: the inputs and the assistant message
before them, the heartbeat after them."""

from collections.abc import Sequence
from datetime import UTC, datetime

from memvm.ids import new_id
from memvm.llm.types import Completion, ToolCall
from memvm.messages.schemas import MessageCreate
from memvm.orm import Message
from memvm.runtime.loop.approvals import WaitKind, calls_json
from memvm.runtime.loop.conversation import heartbeat_text


def step_head(
    inputs: Sequence[MessageCreate],
    completion: Completion,
    waiting: Sequence[tuple[ToolCall, WaitKind]],
    base: dict[str, str],
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


def heartbeat(why: str, base: dict[str, str]) -> Message:
    """The user-role message that hands control back to the agent for another step."""
    return Message(
        id=new_id("message"), role="user", kind="heartbeat", content=heartbeat_text(why, datetime.now(UTC).isoformat()), **base
    )
