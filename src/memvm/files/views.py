"""What an agent sees of its folders' files: one view (agent_file row) per processed file of each
attached folder, open or closed. An open view holds its rendered window (memory/files_view.py), so
a recompile never reads a file. At most `max_files_open` views of an agent are open: opening one
more closes the least recently used (Letta's LRU). Every change recompiles the agent.

Every change takes the agent's files lock (view_rows.lock_agent_files) before the agent row, which
it locks only at the recompile, and after any folder and file rows it locks: the lock order is
written once, in files/service.py's docstring."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.pagination import PageRequest, fetch_page
from memvm.errors import Conflict, InvalidInput, NotFound
from memvm.files import view_rows
from memvm.files.schemas import AgentFileRead, FileBlockRead
from memvm.ids import new_id
from memvm.memory.files_view import FileLimits, Window, file_lines, render_window
from memvm.orm import Agent, AgentFile, Folder, FolderFile
from memvm.prompts.service import file_limits_of, recompile_agents


@dataclass(frozen=True)
class OpenRequest:
    """One file the model asks to open: `offset` is the 0-based first line (Letta's), `length` the
    number of lines; neither: the whole file, as much as fits."""

    file_name: str
    offset: int | None = None
    length: int | None = None


@dataclass(frozen=True)
class OpenedFile:
    file_name: str
    window: Window  # the lines now in view, and whether the view was cut (`cut`)
    previous: tuple[int | None, int | None] | None  # the lines in view before, if it was open


@dataclass(frozen=True)
class OpenOutcome:
    opened: tuple[OpenedFile, ...]
    closed_by_request: tuple[str, ...]  # close_all_others
    closed_by_limit: tuple[str, ...]  # least recently used, over max_files_open


@dataclass
class _AgentFiles:
    """An agent's views, loaded under its files lock, least recently used first."""

    agent: Agent
    limits: FileLimits
    rows: list[AgentFile]
    names: dict[str, str]  # file id -> file name

    def named(self, file_name: str) -> AgentFile | None:
        return next((row for row in self.rows if self.names[row.file_id] == file_name), None)

    def of_file(self, file_id: str) -> AgentFile | None:
        return next((row for row in self.rows if row.file_id == file_id), None)


async def lock_files(session: AsyncSession, agent_id: str) -> None:
    """Hold the agent's files lock until the transaction ends (see the module's docstring)."""
    await view_rows.lock_agent_files(session, agent_id)


async def _load(session: AsyncSession, agent_id: str) -> _AgentFiles:
    await view_rows.lock_agent_files(session, agent_id)
    agent = await view_rows.agent(session, agent_id)
    if agent is None:
        raise NotFound(f"Agent {agent_id!r} not found.")
    loaded = await view_rows.files_of_agent(session, agent_id)
    return _AgentFiles(agent, file_limits_of(agent), [row for row, _ in loaded], {row.file_id: name for row, name in loaded})


def _show(row: AgentFile, window: Window, moment: datetime) -> None:
    row.is_open, row.visible_content = True, window.text
    row.start_line, row.end_line = window.start_line, window.end_line
    row.last_accessed_at = moment


def _close(row: AgentFile) -> None:
    row.is_open, row.visible_content, row.start_line, row.end_line = False, None, None, None


def _open(files: _AgentFiles, shown: Sequence[tuple[AgentFile, Window]]) -> list[str]:
    """Open these views (in this order: the last is the most recently used), then close the least
    recently used others beyond max_files_open; returns the names of those closed."""
    now = datetime.now(UTC)
    for index, (row, window) in enumerate(shown):
        _show(row, window, now + timedelta(microseconds=index))
    return _evict(files)


def _evict(files: _AgentFiles) -> list[str]:
    """Close the least recently used open views beyond max_files_open; returns their names."""
    open_rows = sorted((row for row in files.rows if row.is_open), key=lambda row: (row.last_accessed_at, row.id))
    evicted = open_rows[: max(len(open_rows) - files.limits.max_files_open, 0)]
    for row in evicted:
        _close(row)
    return [files.names[row.file_id] for row in evicted]


async def _done(session: AsyncSession, agent_ids: Sequence[str]) -> None:
    await session.flush()
    await recompile_agents(session, agent_ids)


# --- what the worker and deletions call ---------------------------------------------------------


async def show_new_file(session: AsyncSession, file: FolderFile) -> None:
    """A file's text was just stored: every agent its folder is attached to gets it open (LRU-bounded);
    an agent that already had it sees the new text from line 1."""
    await session.flush()
    content = (await view_rows.contents(session, [file.id])).get(file.id)
    if content is None:
        return
    agent_ids = await view_rows.agents_reading(session, file.folder_id)
    for agent_id in sorted(agent_ids):
        files = await _load(session, agent_id)
        row = files.of_file(file.id) or _new_view(session, files, file, is_open=False)
        _open(files, [(row, render_window(content, view_chars=files.limits.view_chars))])
    await _done(session, agent_ids)


def _new_view(session: AsyncSession, files: _AgentFiles, file: FolderFile, *, is_open: bool) -> AgentFile:
    row = AgentFile(
        id=new_id("file_agent"),
        organization_id=file.organization_id,  # the worker's session spans organizations
        agent_id=files.agent.id,
        file_id=file.id,
        folder_id=file.folder_id,
        is_open=is_open,
        last_accessed_at=datetime.now(UTC),
    )
    session.add(row)
    files.rows.append(row)
    files.names[file.id] = file.file_name
    return row


async def forget_files(session: AsyncSession, file_ids: Sequence[str]) -> None:
    """Before files are deleted: their views go, and the agents that had them are recompiled."""
    if file_ids:
        await _done(session, await view_rows.delete_views_of_files(session, file_ids))


async def drop_folder(session: AsyncSession, folder: Folder) -> None:
    """Delete a folder (its files, their views and its links to agents go with it: ON DELETE CASCADE),
    then recompile the agents it was attached to, which no longer list it."""
    agent_ids = await view_rows.agents_reading(session, folder.id)
    await session.delete(folder)
    await _done(session, agent_ids)


async def touch(session: AsyncSession, agent_id: str, file_ids: Sequence[str]) -> None:
    """The agent just used these files (a grep or search hit): they are the last to be closed."""
    if file_ids:
        await view_rows.touch(session, agent_id, file_ids, datetime.now(UTC))


# --- folders attached and detached (files.service) ----------------------------------------------


async def show_folder(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    """A folder was attached: each of its processed files gets a view, the oldest max_files_open of
    them open (as Letta opens them all, bounded), closing the agent's least recently used others."""
    files = await _load(session, agent_id)
    new = [file for file in await view_rows.processed_files(session, folder_id) if files.of_file(file.id) is None]
    rows = [_new_view(session, files, file, is_open=False) for file in new]
    opening = rows[: files.limits.max_files_open]
    texts = await view_rows.contents(session, [row.file_id for row in opening])
    windows = [render_window(texts[row.file_id], view_chars=files.limits.view_chars) for row in opening]
    _open(files, list(zip(opening, windows, strict=True)))
    await _done(session, [agent_id])


async def hide_folder(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    """A folder was detached: the agent's views of its files go."""
    await lock_files(session, agent_id)
    await view_rows.delete_views_of_folder(session, agent_id, folder_id)
    await _done(session, [agent_id])


# --- the open_files tool ------------------------------------------------------------------------


async def open_files(
    session: AsyncSession, agent_id: str, requests: Sequence[OpenRequest], *, close_all_others: bool
) -> OpenOutcome:
    """Open files by name at the lines asked for. Checks every request before changing anything: more
    files than max_files_open, an unknown name or an offset past the end is an error naming it."""
    files = await _load(session, agent_id)
    if len(requests) > files.limits.max_files_open:
        raise InvalidInput(
            f"Cannot open {len(requests)} files: exceeds configured maximum limit of {files.limits.max_files_open} files"
        )
    rows = [_named(files, request.file_name) for request in requests]
    texts = await view_rows.contents(session, [row.file_id for row in rows])
    windows = [_requested_window(files, row, texts[row.file_id], request) for row, request in zip(rows, requests, strict=True)]
    previous = [(row.start_line, row.end_line) if row.is_open else None for row in rows]
    closed_by_request = _close_others(files, {row.file_id for row in rows}) if close_all_others else []
    closed_by_limit = _open(files, list(zip(rows, windows, strict=True)))
    await _done(session, [agent_id])
    opened = (OpenedFile(files.names[row.file_id], w, p) for row, w, p in zip(rows, windows, previous, strict=True))
    return OpenOutcome(tuple(opened), tuple(closed_by_request), tuple(closed_by_limit))


def _named(files: _AgentFiles, file_name: str) -> AgentFile:
    row = files.named(file_name)
    if row is None:
        attached = sorted(files.names.values())
        raise NotFound(
            f"{file_name} not attached - did you get the filename correct? "
            f"Currently you have the following files attached: {attached}"
        )
    return row


def _requested_window(files: _AgentFiles, row: AgentFile, content: str, request: OpenRequest) -> Window:
    total = len(file_lines(content))
    offset = request.offset or 0
    name = files.names[row.file_id]
    if offset < 0 or (request.length is not None and request.length < 1):
        raise InvalidInput(f"File {name}: offset must be >= 0 and length >= 1 (got {request.offset}, {request.length}).")
    if offset and offset >= total:
        raise InvalidInput(f"File {name} has only {total} lines, but requested offset {offset + 1} is out of range")
    return render_window(content, view_chars=files.limits.view_chars, start_line=offset + 1, length=request.length)


def _close_others(files: _AgentFiles, keep: set[str]) -> list[str]:
    closing = [row for row in files.rows if row.is_open and row.file_id not in keep]
    for row in closing:
        _close(row)
    return [files.names[row.file_id] for row in closing]


# --- the agents.files routes --------------------------------------------------------------------


async def open_file(session: AsyncSession, agent_id: str, file_id: str) -> list[str]:
    """Open the whole file (as much as fits, from line 1); returns the names closed to make room."""
    files = await _load(session, agent_id)
    row = await _viewed(session, files, file_id)
    content = (await view_rows.contents(session, [file_id]))[file_id]
    closed = _open(files, [(row, render_window(content, view_chars=files.limits.view_chars))])
    await _done(session, [agent_id])
    return closed


async def close_file(session: AsyncSession, agent_id: str, file_id: str) -> None:
    files = await _load(session, agent_id)
    _close(await _viewed(session, files, file_id))
    await _done(session, [agent_id])


async def close_all(session: AsyncSession, agent_id: str) -> list[str]:
    """Close every open file; returns their names, least recently used first."""
    files = await _load(session, agent_id)
    closed = _close_others(files, keep=set())
    await _done(session, [agent_id])
    return closed


async def _viewed(session: AsyncSession, files: _AgentFiles, file_id: str) -> AgentFile:
    """The agent's view of the file; a file it cannot see yet is a 409 that says why, else a 404."""
    row = files.of_file(file_id)
    if row is not None:
        return row
    file = await view_rows.file(session, file_id)
    if file is None:
        raise NotFound(f"File {file_id!r} not found.")
    if not await view_rows.is_attached(session, files.agent.id, file.folder_id):
        raise NotFound(f"File {file_id!r} is not in a folder attached to agent {files.agent.id!r}; attach its folder first.")
    if file.processing_status == "error":
        raise Conflict(f"File {file_id!r} could not be processed ({file.error_message}); upload it again to open it.")
    raise Conflict(
        f"File {file_id!r} is still being processed (processing_status {file.processing_status!r}); "
        "the agent sees it once its text is extracted."
    )


async def list_views(
    session: AsyncSession, agent_id: str, page: PageRequest, *, is_open: bool | None
) -> tuple[list[AgentFileRead], bool]:
    """One page of the agent's files by upload time, and whether more follow."""
    wider = PageRequest(page.limit + 1, page.order, page.before, page.after)
    rows: list[AgentFile] = await fetch_page(session, view_rows.listing_query(agent_id, is_open), view_rows.ByFileUpload, wider)
    has_more = len(rows) > page.limit
    if has_more:  # the extra row is the one farthest from the cursor
        rows = rows[1:] if page.before is not None and page.after is None else rows[:-1]
    names = await view_rows.names(session, rows)
    return [_read(row, *names[row.file_id]) for row in rows], has_more


def _read(row: AgentFile, file_name: str, folder_name: str) -> AgentFileRead:
    return AgentFileRead(
        id=row.id,
        file_id=row.file_id,
        file_name=file_name,
        folder_id=row.folder_id,
        folder_name=folder_name,
        is_open=row.is_open,
        start_line=row.start_line,
        end_line=row.end_line,
        last_accessed_at=row.last_accessed_at,
        visible_content=row.visible_content,
    )


# --- an imported agent (agentfiles) -------------------------------------------------------------


@dataclass(frozen=True)
class KeptView:
    """An agent's view of a file as an agent file describes it. The lines are the file's (1-based,
    the last one included); `text`, the window as exported, is kept when it fits the agent's view
    and its lines are the file's, else the window is rendered again."""

    file_id: str
    is_open: bool
    start_line: int | None = None
    end_line: int | None = None
    text: str | None = None
    last_accessed_at: datetime = datetime.min.replace(tzinfo=UTC)


async def restore_views(session: AsyncSession, agent_id: str, kept: Sequence[KeptView]) -> None:
    """Once an imported agent has its folders: the views its file kept open are opened at the lines
    they showed (at most max_files_open, the most recently used), every other view is closed."""
    files = await _load(session, agent_id)
    rows = {row.file_id: row for row in files.rows}
    for row in files.rows:
        _close(row)
    opening = sorted((view for view in kept if view.is_open and view.file_id in rows), key=lambda view: view.last_accessed_at)
    texts = await view_rows.contents(session, [view.file_id for view in opening])
    _open(files, [(rows[view.file_id], _kept_window(view, texts[view.file_id], files.limits.view_chars)) for view in opening])
    await _done(session, [agent_id])


def _kept_window(view: KeptView, content: str, view_chars: int) -> Window:
    total = len(file_lines(content))
    start, end = view.start_line or 1, view.end_line or total
    if not 1 <= start <= end <= total:
        return render_window(content, view_chars=view_chars)
    if view.text is not None and len(view.text) <= view_chars:
        return Window(view.text, start, end, total)
    return _window_at(content, view_chars, start, end)


def _window_at(content: str, view_chars: int, start: int, end: int | None) -> Window:
    """Lines start..end again (the whole file if they were all of it), as many as fit."""
    whole = start == 1 and end == len(file_lines(content))
    return render_window(
        content, view_chars=view_chars, start_line=start, length=None if whole or end is None else end - start + 1
    )


# --- the agent's own settings -------------------------------------------------------------------


async def refit(session: AsyncSession, agent_id: str) -> None:
    """The agent's limits changed: close the least recently used files beyond the new max_files_open
    and re-render the open views at the new size (same first line, same lines asked for)."""
    files = await _load(session, agent_id)
    _evict(files)
    open_rows = [row for row in files.rows if row.is_open]
    texts = await view_rows.contents(session, [row.file_id for row in open_rows])
    for row in open_rows:
        row.visible_content = _window_at(texts[row.file_id], files.limits.view_chars, row.start_line or 1, row.end_line).text
    await _done(session, [agent_id])


async def file_blocks(session: AsyncSession, agents: Sequence[Agent]) -> dict[str, list[FileBlockRead]]:
    """AgentState.memory.file_blocks of each agent, by file name."""
    limits = {agent.id: file_limits_of(agent).view_chars for agent in agents}
    blocks: dict[str, list[FileBlockRead]] = {agent.id: [] for agent in agents}
    for row, name in await view_rows.views_of_agents(session, list(limits)):
        blocks[row.agent_id].append(
            FileBlockRead(
                file_id=row.file_id,
                source_id=row.folder_id,
                is_open=row.is_open,
                value=row.visible_content or "",
                label=name,
                limit=limits[row.agent_id],
                last_accessed_at=row.last_accessed_at,
            )
        )
    return blocks
