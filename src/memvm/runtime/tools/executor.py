"""Run one tool call: parse and check its arguments, dispatch to the handler inside a savepoint
(so a failed call leaves nothing behind) unless it needs none, and turn domain errors into results
the model can act on."""

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from types import UnionType
from typing import Any, Union, get_args, get_origin

from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.errors import DomainError
from memvm.ids import new_id
from memvm.llm.types import ToolCall
from memvm.orm import Message
from memvm.prompts.service import recompiles_dropped_on_error
from memvm.runtime.tools import archival_memory_tools, conversation_tools, file_tools, memory_command, memory_tools
from memvm.runtime.tools.arguments import check_names, parse_arguments
from memvm.runtime.tools.context import ToolContext
from memvm.runtime.tools.outcome import ToolOutcome, clip
from memvm.tools.builtin import TERMINAL_TOOLS
from memvm.tools.schemas import RETURN_CHAR_LIMIT

Handler = Callable[..., Awaitable[str]]

HANDLERS: dict[str, Handler] = {
    "send_message": conversation_tools.send_message,
    "conversation_search": conversation_tools.conversation_search,
    "core_memory_append": memory_tools.core_memory_append,
    "core_memory_replace": memory_tools.core_memory_replace,
    "memory_replace": memory_tools.memory_replace,
    "memory_insert": memory_tools.memory_insert,
    "memory_rethink": memory_tools.memory_rethink,
    "memory_finish_edits": memory_tools.memory_finish_edits,
    "memory_apply_patch": memory_tools.memory_apply_patch,
    "memory": memory_command.memory,
    "archival_memory_insert": archival_memory_tools.archival_memory_insert,
    "archival_memory_search": archival_memory_tools.archival_memory_search,
    "open_files": file_tools.open_files,
    "grep_files": file_tools.grep_files,
    "semantic_search_files": file_tools.semantic_search_files,
}

# Handlers that write nothing, or write once after every check that can refuse the call: a refused
# call has changed nothing, so it needs no savepoint (two round trips to PostgreSQL, on most steps:
# send_message is the usual last call). A write that fails fails the step either way. The others
# may be refused after a write (a patch of several blocks, an archival insert's later statements, a
# file opened past the limit, a grep cancelled by its timeout) and run inside a savepoint.
NEED_NO_SAVEPOINT = frozenset(
    {
        "send_message",
        "memory_finish_edits",
        "conversation_search",
        "archival_memory_search",
        "core_memory_append",
        "core_memory_replace",
        "memory_replace",
        "memory_insert",
        "memory_rethink",
    }
)


async def execute_all(
    ctx: ToolContext, calls: Sequence[ToolCall], allowed: frozenset[str], base: Mapping[str, str | None]
) -> tuple[list[Message], list[ToolOutcome]]:
    """Run the calls in order; their result messages (for the caller to store with the step) and outcomes."""
    results: list[Message] = []
    outcomes: list[ToolOutcome] = []
    for call in calls:
        outcome = await execute(ctx, call, allowed)
        metrics.TOOL_CALLS.labels(call.name if call.name in allowed else "(not offered)", outcome.status).inc()
        outcomes.append(outcome)
        results.append(
            Message(
                id=new_id("message"),
                role="tool",
                content=outcome.message,
                tool_status=outcome.status,
                tool_call_id=call.id,
                tool_name=call.name,
                tool_stdout=outcome.stdout,
                tool_stderr=outcome.stderr,
                **base,
            )
        )
    return results, outcomes


async def execute(ctx: ToolContext, call: ToolCall, allowed: frozenset[str]) -> ToolOutcome:
    """A custom tool's call already ran in the sandbox, before the transaction, and a call the
    client denied or ran itself is settled too: their outcomes are in the context. A built-in runs
    now, inside the step's transaction."""
    if call.name in allowed and (settled := ctx.settled.get(call.id)) is not None:
        return settled
    if call.name not in allowed or call.name not in HANDLERS:
        return unknown_tool(call, allowed)
    try:
        arguments = parse_arguments(call)
        heartbeat = bool(arguments.pop("request_heartbeat", False))
        _check_arguments(call.name, arguments)
    except ValueError as error:
        return ToolOutcome.invalid(str(error))
    try:
        with recompiles_dropped_on_error(ctx.session):
            async with _undone_if_refused(ctx.session, call.name):
                # the call's id goes into the history of what it changes
                message = await HANDLERS[call.name](replace(ctx, actor=replace(ctx.actor, tool_call_id=call.id)), **arguments)
    except DomainError as error:
        return ToolOutcome("error", error.message, heartbeat=heartbeat)
    return ToolOutcome("success", clip(message, RETURN_CHAR_LIMIT), terminal=call.name in TERMINAL_TOOLS, heartbeat=heartbeat)


def _undone_if_refused(session: AsyncSession, name: str) -> AbstractAsyncContextManager[object]:
    return nullcontext() if name in NEED_NO_SAVEPOINT else session.begin_nested()


def unknown_tool(call: ToolCall, allowed: frozenset[str]) -> ToolOutcome:
    names = ", ".join(sorted(allowed)) or "none"
    return ToolOutcome.invalid(f"Tool '{call.name}' is not available now. Tools you can call: {names}.")


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """Names and JSON types against the handler's signature, so a bad call gets a precise message."""
    parameters = {key: p for key, p in inspect.signature(HANDLERS[name]).parameters.items() if key != "ctx"}
    required = [key for key, p in parameters.items() if p.default is inspect.Parameter.empty]
    check_names(name, arguments, parameters, required)
    for key, value in arguments.items():
        if value is not None and not _json_type_ok(parameters[key].annotation, value):
            raise ValueError(f"{name}: argument '{key}' has the wrong type ({type(value).__name__}).")


def _json_type_ok(annotation: Any, value: Any) -> bool:
    alternatives = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    kinds = [get_origin(kind) or kind for kind in alternatives if kind is not type(None)]
    if isinstance(value, bool) and bool not in kinds:
        return False  # JSON true is not an integer argument
    return any(isinstance(value, kind) for kind in kinds)
