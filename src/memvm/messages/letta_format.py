"""Stored messages → the Letta message union (`message_type` discriminated dicts) the SDK parses.

One stored message can become several Letta messages (reasoning, tool calls); they share the
stored `id` and get distinct `otid`s.
"""

import json
from typing import Any

from memvm.orm import Message

# MemGPT-style agents speak through send_message; their plain text is inner monologue.
SEND_MESSAGE = "send_message"


def error_message(run_id: str, stop_reason: str, message: str) -> dict[str, Any]:
    """Letta's error_message event, which follows the stop_reason of a turn that failed."""
    return {"message_type": "error_message", "run_id": run_id, "error_type": stop_reason, "message": message, "detail": None}


def to_letta(message: Message, *, agent_type: str, include_compaction: bool = False) -> list[dict[str, Any]]:
    speaks_via_tool = agent_type in {"memgpt_agent", "memgpt_v2_agent"}
    if message.role == "tool":
        return [] if message.tool_name == SEND_MESSAGE else [_tool_return(message)]
    if message.role == "assistant":
        return _assistant(message, speaks_via_tool=speaks_via_tool)
    if message.kind == "approval":
        return [_approval_response(message)]
    if message.kind == "summary" and include_compaction:
        return [_base(message, 0, "summary_message") | {"summary": message.content}]
    message_type = "system_message" if message.role == "system" else "user_message"
    return [_base(message, 0, message_type) | {"content": message.content or ""}]


def _base(message: Message, index: int, message_type: str) -> dict[str, Any]:
    return {
        "id": message.id,
        "date": message.created_at.isoformat(timespec="seconds"),
        "name": None,
        "message_type": message_type,
        "otid": message.otid if message.otid and index == 0 else f"{message.id}-{index}",
        "sender_id": message.sender_id,
        "step_id": message.step_id,
        "run_id": message.run_id,
        "is_err": None,
    }


def _assistant(message: Message, *, speaks_via_tool: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.reasoning:
        parts.append(
            _base(message, len(parts), "reasoning_message")
            | {"reasoning": message.reasoning, "source": "reasoner_model", "signature": None}
        )
    if message.content:
        if speaks_via_tool:
            parts.append(
                _base(message, len(parts), "reasoning_message")
                | {"reasoning": message.content, "source": "non_reasoner_model", "signature": None}
            )
        else:
            parts.append(_base(message, len(parts), "assistant_message") | {"content": message.content})
    waiting = [call for call in message.tool_calls or () if call.get("requires_approval")]
    for call in message.tool_calls or ():
        if call.get("requires_approval"):
            continue
        if speaks_via_tool and call["name"] == SEND_MESSAGE:
            parts.append(_base(message, len(parts), "assistant_message") | {"content": _sent_text(call["arguments"])})
        else:
            parts.append(_base(message, len(parts), "tool_call_message") | _tool_call_fields(call))
    if waiting:  # one request for every call that waits for the client, as Letta shows it
        calls = [_tool_call_fields(call)["tool_call"] for call in waiting]
        parts.append(_base(message, len(parts), "approval_request_message") | {"tool_call": calls[0], "tool_calls": calls})
    return parts


def _tool_call_fields(call: dict[str, Any]) -> dict[str, Any]:
    tool_call = {"name": call["name"], "arguments": call["arguments"], "tool_call_id": call["id"]}
    return {"tool_call": tool_call, "tool_calls": [tool_call]}


def _tool_return(message: Message) -> dict[str, Any]:
    fields = {
        "tool_return": message.content or "",
        "status": message.tool_status or "success",
        "tool_call_id": message.tool_call_id,
        "stdout": [message.tool_stdout] if message.tool_stdout else None,
        "stderr": [message.tool_stderr] if message.tool_stderr else None,
    }
    return _base(message, 0, "tool_return_message") | fields | {"tool_returns": [{"type": "tool", **fields}]}


def _approval_response(message: Message) -> dict[str, Any]:
    answer = json.loads(message.content or "{}")
    approvals = answer.get("approvals", [])
    decisions = {item.get("approve") for item in approvals if item.get("type") == "approval"}
    return _base(message, 0, "approval_response_message") | {
        "approval_request_id": answer.get("approval_request_id"),
        "approvals": approvals,
        "approve": decisions.pop() if len(decisions) == 1 and len(approvals) == 1 else None,
        "reason": approvals[0].get("reason") if len(approvals) == 1 else None,
    }


def _sent_text(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return str(parsed.get("message", "")) if isinstance(parsed, dict) else arguments
