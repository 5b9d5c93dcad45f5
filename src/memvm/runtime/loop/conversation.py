"""Stored messages → the chat messages the model reads (pure)."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from memvm.llm.types import ChatMessage, ToolCall
from memvm.runtime.loop.tokens import estimate_message


class StoredMessage(Protocol):
    """What the model reads of a stored message: a Message, or a row of messages.chat_window_since."""

    @property
    def kind(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str | None: ...
    @property
    def tool_calls(self) -> list[dict[str, Any]] | None: ...
    @property
    def tool_status(self) -> str | None: ...
    @property
    def tool_call_id(self) -> str | None: ...


def tool_result_text(status: str | None, message: str | None) -> str:
    """The compact JSON a tool result is shown to the model as."""
    return json.dumps({"status": "Failed" if status == "error" else "OK", "message": message or ""}, ensure_ascii=False)


def to_chat(message: StoredMessage) -> ChatMessage:
    if message.role == "assistant":
        calls = tuple(ToolCall(call["id"], call["name"], call["arguments"]) for call in message.tool_calls or ())
        return ChatMessage("assistant", message.content, tool_calls=calls)
    if message.role == "tool":
        return ChatMessage("tool", tool_result_text(message.tool_status, message.content), tool_call_id=message.tool_call_id)
    return ChatMessage("system" if message.role == "system" else "user", message.content or "")


def to_chat_all(messages: Iterable[StoredMessage]) -> list[ChatMessage]:
    return [to_chat(message) for message in messages if message.kind != "approval"]


@dataclass
class ChatHistory:
    """The conversation as the model reads it, with its token estimate kept as it grows: a turn
    estimates its prompt twice a step, and summing the whole window each time grew with the window."""

    messages: list[ChatMessage] = field(default_factory=list)
    tokens: int = 0

    @classmethod
    def of(cls, stored: Iterable[StoredMessage]) -> "ChatHistory":
        history = cls()
        history.extend(stored)
        return history

    def extend(self, stored: Iterable[StoredMessage]) -> None:
        added = to_chat_all(stored)
        self.messages.extend(added)
        self.tokens += sum(estimate_message(message) for message in added)


def heartbeat_text(reason: str, now_iso: str) -> str:
    return json.dumps(
        {"type": "heartbeat", "reason": f"[This is an automated system message hidden from the user] {reason}", "time": now_iso}
    )


def summary_text(evicted: int, summary: str) -> str:
    return (
        f"Note: {evicted} earlier messages were moved out of your context window to save space; they remain "
        f"searchable with conversation_search. Summary of them:\n{summary}"
    )
