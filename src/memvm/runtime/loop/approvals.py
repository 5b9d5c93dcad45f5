"""Tool calls that wait for the client: calls that need a human's approval (a requires_approval
rule, or the tool's `default_requires_approval`) and calls to the request's client-side tools.

A step that makes one stops the turn with `requires_approval` and records the waiting calls on the
agent (in PostgreSQL, so the wait survives a restart). The client answers with an approval message:
each waiting call approved (memvm runs it), denied (the model is told, with the reason) or returned
(the client ran it and sends the result). Then the loop goes on. Checking an answer is pure."""

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memvm.conversations.thread import Thread
from memvm.errors import Conflict, InvalidInput
from memvm.ids import new_id
from memvm.llm.types import Completion, ToolCall, ToolSpec
from memvm.messages.schemas import ApprovalCreate, ApprovalReturn, ClientToolReturn, SendRequest
from memvm.orm import Message
from memvm.runtime.tools.outcome import ToolOutcome

WaitKind = Literal["approval", "client"]


@dataclass(frozen=True)
class Waiting:
    """Which tools make a call wait, for one turn."""

    needs_approval: frozenset[str]
    client_tools: frozenset[str]

    def kind(self, name: str) -> WaitKind | None:
        if name in self.client_tools:
            return "client"
        return "approval" if name in self.needs_approval else None

    def calls(self, completion: Completion, offered: set[str]) -> list[tuple[ToolCall, WaitKind]]:
        """The step's calls that wait (a call to a tool not offered is an error result instead)."""
        return [(call, kind) for call in completion.tool_calls if call.name in offered and (kind := self.kind(call.name))]


def client_specs(request: SendRequest, attached: Sequence[str]) -> list[ToolSpec]:
    """The request's client-side tools, offered to the model like attached ones."""
    clashes = [tool.name for tool in request.client_tools or () if tool.name in attached]
    if clashes:
        raise InvalidInput(f"client_tools {', '.join(clashes)} have the names of tools attached to the agent; rename them.")
    empty = {"type": "object", "properties": {}}
    return [ToolSpec(tool.name, tool.description or "", tool.parameters or empty) for tool in request.client_tools or ()]


def pending_record(request_id: str, run_id: str, waiting: Sequence[tuple[ToolCall, WaitKind]]) -> dict[str, Any]:
    """What the agent keeps while it waits: the approval request (the assistant message's id) and
    its calls."""
    return {
        "id": request_id,
        "run_id": run_id,
        "calls": [{"id": call.id, "name": call.name, "arguments": call.arguments, "kind": kind} for call, kind in waiting],
    }


def waiting_calls(pending: dict[str, Any]) -> list[ToolCall]:
    return [ToolCall(call["id"], call["name"], call["arguments"]) for call in pending["calls"]]


def describe(pending: dict[str, Any]) -> str:
    calls = ", ".join(f"{call['name']} ({call['id']})" for call in pending["calls"])
    return f"approval request {pending['id']}: {calls}"


Answer = ApprovalReturn | ClientToolReturn


def answers(pending: dict[str, Any], approval: ApprovalCreate) -> dict[str, Answer]:
    """The answer to each waiting call by tool call id; a 400 that says what is missing or wrong."""
    calls = {call["id"]: call for call in pending["calls"]}
    if approval.approval_request_id is not None and approval.approval_request_id != pending["id"]:
        raise InvalidInput(f"approval_request_id {approval.approval_request_id!r} is not what waits; {describe(pending)}.")
    if approval.approvals:
        given: dict[str, Answer] = {answer.tool_call_id: answer for answer in approval.approvals}
    else:  # Letta's older form: one decision for every waiting call
        assert approval.approve is not None  # the schema requires one of the two
        given = {
            call_id: ApprovalReturn(tool_call_id=call_id, approve=approval.approve, reason=approval.reason) for call_id in calls
        }
    unknown = sorted(set(given) - set(calls))
    missing = sorted(set(calls) - set(given))
    if unknown or missing:
        problems = ([f"unknown tool call id(s) {', '.join(unknown)}"] if unknown else []) + (
            [f"no answer for {', '.join(missing)}"] if missing else []
        )
        raise InvalidInput(f"The approval does not match what waits ({'; '.join(problems)}); {describe(pending)}.")
    for call_id, answer in given.items():
        call = calls[call_id]
        if call["kind"] == "client" and isinstance(answer, ApprovalReturn) and answer.approve:
            raise InvalidInput(
                f"{call['name']} ({call_id}) is a client-side tool: run it and send its result as "
                '{"type": "tool", "tool_call_id": ..., "tool_return": ..., "status": "success"}.'
            )
    return given


def answered_outcome(answer: Answer) -> ToolOutcome | None:
    """The outcome of a call the client settled (denied, or ran itself); None: memvm runs it."""
    if isinstance(answer, ClientToolReturn):
        return ToolOutcome(
            answer.status,
            answer.text,
            stdout="".join(answer.stdout) if answer.stdout else None,
            stderr="".join(answer.stderr) if answer.stderr else None,
        )
    if not answer.approve:
        return ToolOutcome("error", f"Error: request to call tool denied. User reason: {answer.reason or ''}".rstrip())
    return None


def answers_to_pending(thread: Thread, request: SendRequest) -> dict[str, Answer] | None:
    """A new message while the conversation waits is refused (409); an approval must answer what
    waits. The refusal says "waiting for approval", which clients such as Letta Code look for."""
    approval, pending = request.approval(), thread.pending_approval
    if pending is None:
        if approval is not None:
            raise InvalidInput(f"In {thread.name}, the agent is not waiting for an approval; send a normal message.")
        return None
    if approval is None:
        raise Conflict(
            f"In {thread.name}, the agent is waiting for approval on a tool call: the client's answer to "
            f"{describe(pending)}. Answer it first with "
            '{"type": "approval", "approvals": [{"type": "approval", "tool_call_id": ..., "approve": true}]}.'
        )
    return answers(pending, approval)


def answer_message(
    pending: dict[str, Any], given: dict[str, Answer], approval: ApprovalCreate | None, base: dict[str, str | None]
) -> Message:
    """The client's answers as stored: shown as an approval_response_message, never to the model
    (it reads the tool results that follow)."""
    content = json.dumps(
        {"approval_request_id": pending.get("id"), "approvals": [a.model_dump(exclude_none=True) for a in given.values()]}
    )
    return Message(id=new_id("message"), role="user", kind="approval", content=content, otid=approval and approval.otid, **base)


def calls_json(completion: Completion, waiting: Sequence[tuple[ToolCall, WaitKind]]) -> list[dict[str, Any]]:
    """The calls as stored on the assistant message; those that wait are marked (shown as approval
    requests)."""
    held = {call.id for call, _ in waiting}
    return [
        {"id": call.id, "name": call.name, "arguments": call.arguments} | ({"requires_approval": True} if call.id in held else {})
        for call in completion.tool_calls
    ]


def without(completion: Completion, waiting: Sequence[tuple[ToolCall, WaitKind]]) -> Completion:
    """The calls that run now: all but those waiting for the client."""
    held = {call.id for call, _ in waiting}
    return dataclasses.replace(completion, tool_calls=tuple(call for call in completion.tool_calls if call.id not in held))
