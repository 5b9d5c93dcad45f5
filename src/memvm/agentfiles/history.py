"""A file's messages → memvm message rows, checked as they stream by (pure; no I/O).

Letta keeps message content as typed parts and packs each tool result as a JSON object
(`{"status": "OK", "message": …, "time": …}`); memvm stores the text, the reasoning and the bare
tool result. A history is usable only if every tool call is answered by the tool messages right
after it (the chat API refuses anything else), so the walk checks that pairing and reports every
break; with `repair` it drops the unanswered calls and the orphaned returns instead.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from memvm.agentfiles.fileschema import FileAgent, FileMessage

Row = dict[str, Any]
_TEXT_PARTS = frozenset({"text"})
_REASONING_PARTS = frozenset({"reasoning"})
_MEMVM_KINDS = frozenset({"message", "heartbeat", "summary", "approval"})


def parse_message(raw: Any, where: str) -> FileMessage | str:
    """The message, or a problem naming what is wrong with it."""
    try:
        return FileMessage.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        return f"{where}: not a message ({'.'.join(str(part) for part in first['loc'])}: {first['msg']})"


def to_row(message: FileMessage) -> Row:
    """The stored columns of one message (ids, agent and context flags are set by the caller)."""
    row: Row = {"otid": None, "sender_id": message.sender_id, "kind": "message", "content": None, "reasoning": None}
    if message.created_at is not None:
        row["created_at"] = message.created_at
    if message.role == "tool":
        return row | _tool_result(message)
    if message.role == "approval" and not message.tool_calls:
        answer = {"approval_request_id": message.approval_request_id, "approvals": message.approvals or []}
        return row | {"role": "user", "kind": "approval", "content": json.dumps(answer)}
    texts, reasoning = _parts(message.content)
    row |= {"content": texts, "reasoning": reasoning}
    if message.role in ("assistant", "approval"):
        # A Letta approval request waits on all its calls; memvm's own files flag each call that waits.
        flagged = any(call.get("requires_approval") for call in message.tool_calls or ())
        waits = message.role == "approval" and not flagged
        calls = [_call(call, waits=waits) for call in message.tool_calls or ()]
        return row | {"role": "assistant", "tool_calls": calls or None}
    kind = message.memvm_kind if message.memvm_kind in _MEMVM_KINDS else "message"
    return row | {"role": "system" if message.role == "system" else "user", "kind": kind, "otid": message.otid}


def _parts(content: list[dict[str, Any]] | str | None) -> tuple[str | None, str | None]:
    if isinstance(content, str) or content is None:
        return content, None
    texts = [str(part.get("text") or "") for part in content if part.get("type") in _TEXT_PARTS]
    reasoning = [str(part.get("reasoning") or "") for part in content if part.get("type") in _REASONING_PARTS]
    return ("".join(texts) if texts else None), ("".join(reasoning) if reasoning else None)


def _call(call: dict[str, Any], *, waits: bool) -> dict[str, Any]:
    """OpenAI's shape ({id, function: {name, arguments}}) → memvm's ({id, name, arguments})."""
    function = call.get("function") or {}
    stored = {"id": str(call.get("id") or ""), "name": str(function.get("name") or ""), "arguments": function.get("arguments")}
    if not isinstance(stored["arguments"], str):
        stored["arguments"] = json.dumps(stored["arguments"] or {})
    return stored | ({"requires_approval": True} if waits or call.get("requires_approval") else {})


def _one_per_return(message: FileMessage) -> list[FileMessage]:
    """Letta answers parallel calls with one tool message holding a return per call; memvm stores
    one tool message per call."""
    returns = message.tool_returns or []
    if len(returns) <= 1:
        return [message]
    return [
        message.model_copy(update={"tool_returns": [item], "tool_call_id": item.get("tool_call_id"), "content": None})
        for item in returns
    ]


def _tool_result(message: FileMessage) -> Row:
    returned = (message.tool_returns or [{}])[0]
    text, _ = _parts(message.content)
    packed = returned.get("func_response") if text is None else text
    status, result = _unpack(packed)
    status = returned.get("status") or status
    return {
        "role": "tool",
        "tool_call_id": message.tool_call_id or returned.get("tool_call_id"),
        "tool_name": message.name,
        "tool_status": "error" if status == "error" else "success",
        "content": result,
        "tool_stdout": "".join(returned.get("stdout") or ()) or None,
        "tool_stderr": "".join(returned.get("stderr") or ()) or None,
    }


def _unpack(packed: Any) -> tuple[str, str | None]:
    """Letta's packed result → (status, bare result); anything else is the result as it is."""
    if not isinstance(packed, str):
        return "success", None if packed is None else json.dumps(packed)
    try:
        parsed = json.loads(packed)
    except json.JSONDecodeError:
        return "success", packed
    if isinstance(parsed, dict) and "status" in parsed and "message" in parsed:
        message = parsed["message"]
        text = message if isinstance(message, str) or message is None else json.dumps(message)
        return ("error" if parsed["status"] == "Failed" else "success"), text
    return "success", packed


@dataclass
class HistoryWalk:
    """One agent's messages in file order → rows ready to store, with the problems found.

    Holds back an assistant message with tool calls (and what follows it) until every call is
    answered, so that `repair` can still drop the unanswered ones before anything is written.
    """

    agent: FileAgent
    repair: bool
    problems: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    _held: list[Row] = field(default_factory=list)
    _open_calls: dict[str, str] = field(default_factory=dict)  # call id → id of the message that made it
    _in_context: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _context_order: list[str] = field(default_factory=list)  # in-context messages, as stored
    _system_prompt_id: str | None = None

    def __post_init__(self) -> None:
        self._in_context = list(self.agent.in_context_message_ids)

    def _where(self, message_id: str) -> str:
        return f"agent {self.agent.id} message {message_id}"

    def accept(self, message: FileMessage) -> list[Row]:
        """Rows that are ready to store (possibly none yet, possibly several held ones)."""
        if message.id in self._seen:
            self.problems.append(f"{self._where(message.id)}: the id appears twice in the file; ids must be unique.")
            return []
        self._seen.add(message.id)
        if self._in_context[:1] == [message.id] and message.role == "system":
            self._system_prompt_id = message.id
            return []  # the compiled system prompt: memvm compiles its own from the agent and its blocks
        if message.role == "tool":
            return [ready for part in _one_per_return(message) for ready in self._answer(message.id, self._row(part))]
        row = self._row(message)
        if row["kind"] == "approval" and self._open_calls:
            self._held.append(row)
            return []
        ready = self._close()
        if row["role"] == "assistant" and row.get("tool_calls"):
            self._held = [row]
            self._open_calls = {call["id"]: message.id for call in row["tool_calls"]}
            return ready
        return [*ready, row]

    def _row(self, message: FileMessage) -> Row:
        row = to_row(message) | {"file_id": message.id, "in_context": message.id in self._in_context}
        self._place_in_window(message, row)
        return row

    def finish(self) -> list[Row]:
        ready = self._close()
        missing = [message_id for message_id in self._in_context if message_id not in self._seen]
        if missing:
            self.problems.append(
                f"agent {self.agent.id}: in_context_message_ids names messages the file does not contain: {', '.join(missing)}."
            )
        window = self._window()
        if not missing and self._context_order != window:
            self._report(
                f"agent {self.agent.id}: in_context_message_ids lists the window in an order that differs from the "
                "messages' order in the file; memvm keeps the window in time order (a summary first).",
                f"agent {self.agent.id}: kept the context window in the messages' time order.",
            )
        return ready

    def _place_in_window(self, message: FileMessage, row: Row) -> None:
        """memvm orders the window by time, with the running summary first. Letta lists its summary
        first too but stores it later, so an in-context message that comes first in the window yet
        later in the file is that summary."""
        if not row["in_context"] or message.id in self._context_order[-1:]:  # (one message, several returns)
            return
        window = self._window()
        if window and message.id == window[0] and self._context_order:
            row["kind"] = "summary"
            self._context_order.insert(0, message.id)
        else:
            self._context_order.append(message.id)

    def _window(self) -> list[str]:
        return [message_id for message_id in self._in_context if message_id != self._system_prompt_id]

    def _answer(self, message_id: str, row: Row) -> list[Row]:
        call_id = row.get("tool_call_id")
        if call_id not in self._open_calls:
            self._report(
                f"{self._where(message_id)}: the tool return for call {call_id!r} follows no assistant message "
                "that made this call (or the call was already answered).",
                f"{self._where(message_id)}: dropped a tool return that answers no call.",
            )
            return []
        del self._open_calls[call_id]
        self._held.append(row)
        return [] if self._open_calls else self._close()

    def _close(self) -> list[Row]:
        """Release the held rows; calls still open at this point are never answered."""
        held, self._held = self._held, []
        if self._open_calls:
            for call_id, message_id in self._open_calls.items():
                self._report(
                    f"{self._where(message_id)}: tool call {call_id!r} has no tool return right after it.",
                    f"{self._where(message_id)}: dropped tool call {call_id!r}, which had no return.",
                )
            self._drop_unanswered(held)
            self._open_calls = {}
        return [row for row in held if row["role"] != "assistant" or row["content"] or row["reasoning"] or row["tool_calls"]]

    def _drop_unanswered(self, held: list[Row]) -> None:
        if self.repair and held:
            calls = [call for call in held[0]["tool_calls"] if call["id"] not in self._open_calls]
            held[0]["tool_calls"] = calls or None

    def _report(self, problem: str, repair: str) -> None:
        (self.repairs if self.repair else self.problems).append(repair if self.repair else problem)
