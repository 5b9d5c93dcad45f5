"""Stored messages → the chat messages the model reads (pure)."""

import json
from collections.abc import Sequence

from memvm.llm.types import ChatMessage, ToolCall
from memvm.orm import Message


def tool_result_text(status: str | None, message: str | None) -> str:
    """The compact JSON a tool result is shown to the model as."""
    return json.dumps({"status": "Failed" if status == "error" else "OK", "message": message or ""}, ensure_ascii=False)


def to_chat(message: Message) -> ChatMessage:
    if message.role == "assistant":
        calls = tuple(ToolCall(call["id"], call["name"], call["arguments"]) for call in message.tool_calls or ())
        return ChatMessage("assistant", message.content, tool_calls=calls)
    if message.role == "tool":
        return ChatMessage("tool", tool_result_text(message.tool_status, message.content), tool_call_id=message.tool_call_id)
    return ChatMessage("system" if message.role == "system" else "user", message.content or "")


def to_chat_all(messages: Sequence[Message]) -> list[ChatMessage]:
    return [to_chat(message) for message in messages if message.kind != "approval"]


def heartbeat_text(reason: str, now_iso: str) -> str:
    return json.dumps(
        {"type": "heartbeat", "reason": f"[This is an automated system message hidden from the user] {reason}", "time": now_iso}
    )


def summary_text(evicted: int, summary: str) -> str:
    return (
        f"Note: {evicted} earlier messages were moved out of your context window to save space; they remain "
        f"searchable with conversation_search. Summary of them:\n{summary}"
    )
