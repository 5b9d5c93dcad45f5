"""open_files, grep_files and semantic_search_files: the agent's tools over the files of its folders,
with Letta 0.16.8's names, arguments and result texts."""

from collections.abc import Sequence
from typing import Any

from memvm.errors import InvalidInput
from memvm.files import search, views
from memvm.files.views import OpenedFile, OpenOutcome, OpenRequest
from memvm.runtime.tools.context import ToolContext

_REQUEST_KEYS = frozenset({"file_name", "offset", "length"})


async def open_files(ctx: ToolContext, file_requests: list[Any], close_all_others: bool = False) -> str:
    requests = [_open_request(n, request) for n, request in enumerate(file_requests)]
    if not requests:
        raise InvalidInput("No file requests provided; pass at least one {file_name, offset?, length?}.")
    outcome = await views.open_files(ctx.session, ctx.agent_id, requests, close_all_others=close_all_others)
    return _opened_text(requests, outcome)


async def grep_files(
    ctx: ToolContext, pattern: str, include: str | None = None, context_lines: int | None = 1, offset: int | None = None
) -> str:
    return await search.grep_files(
        ctx.session,
        ctx.agent_id,
        pattern,
        include=include,
        context_lines=1 if context_lines is None else context_lines,
        offset=offset or 0,
    )


async def semantic_search_files(ctx: ToolContext, query: str, limit: int = 5) -> str:
    return await search.search_files(ctx.session, ctx.agent_id, ctx.folder_vectors.get(query, {}), query, limit)


def _open_request(n: int, request: Any) -> OpenRequest:
    """One of the model's file_requests, checked: a clear error names what is wrong with which one."""
    where = f"file_requests[{n}]"
    if not isinstance(request, dict) or not isinstance(request.get("file_name"), str):
        raise InvalidInput(f"{where} must be an object with a string file_name (and optional offset, length).")
    if unknown := sorted(set(request) - _REQUEST_KEYS):
        raise InvalidInput(f"{where} has unknown keys {unknown}; the keys are file_name, offset and length.")
    name, offset, length = request["file_name"], request.get("offset"), request.get("length")
    for key, value, least in (("Offset", offset, 0), ("Length", length, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise InvalidInput(f"{key} for file {name} must be an integer >= {least}, got {value!r}")
    return OpenRequest(name, offset, length)


def _opened_text(requests: Sequence[OpenRequest], outcome: OpenOutcome) -> str:
    """Letta's answer: what was opened (the lines asked for, and the lines in view when they did not
    all fit), what was in view before, and what was closed and why."""
    opened = [_opened(request, file) for request, file in zip(requests, outcome.opened, strict=True)]
    text = f"* Opened {opened[0]}" if len(opened) == 1 else f"* Opened {len(opened)} files: {', '.join(opened)}"
    if outcome.closed_by_request:
        closed = outcome.closed_by_request
        text += f"\nNote: Closed {len(closed)} file(s) due to close_all_others=True: {', '.join(closed)}"
    if outcome.closed_by_limit:
        closed = outcome.closed_by_limit
        text += f"\nNote: Closed {len(closed)} least recently used file(s) due to open file limit: {', '.join(closed)}"
    return text


def _opened(request: OpenRequest, file: OpenedFile) -> str:
    text = file.file_name
    if request.offset is not None or request.length is not None:
        first = (request.offset or 0) + 1
        text += f" (lines {first}-{first + request.length - 1 if request.length else 'end'})"
    if file.window.cut:
        text += f" (lines {file.window.start_line}-{file.window.end_line} in view: the rest did not fit)"
    if file.previous is not None:
        start, end = file.previous
        text += (
            f" (previously lines {start}-{end if end is not None else 'end'})" if start is not None else " (previously full file)"
        )
    return text
