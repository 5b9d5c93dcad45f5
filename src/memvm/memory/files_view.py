"""What an agent sees of its folders' files: the window of an open file, and the ``<directories>``
section of the system prompt that lists every attached file (Letta's layout, schemas/memory.py).

Pure: text in, text out. A file's lines are the lines of its parsed content, numbered from 1 as
in the file (blank lines kept), so the numbers a window shows are the ones grep and search hits
name and the offsets ``open_files`` takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Letta's defaults by the model's context window (utils.calculate_file_defaults_based_on_context_window):
# (largest window, max files open, characters per file view); an unknown window gets UNKNOWN_WINDOW_LIMITS.
_LIMITS_BY_CONTEXT_WINDOW = ((8_000, 3, 5_000), (32_000, 5, 15_000), (128_000, 10, 25_000), (200_000, 10, 40_000))
_LARGEST_WINDOW_LIMITS = (15, 40_000)
_UNKNOWN_WINDOW_LIMITS = (5, 50_000)
MAX_FILES_OPEN_CAP = 1_000
MAX_VIEW_CHARS_CAP = 2_147_483_647  # the agent's column is a 32-bit integer
MIN_VIEW_CHARS = 500  # room for the header, a line and the note that says how to read on


@dataclass(frozen=True)
class FileLimits:
    max_files_open: int
    view_chars: int  # per_file_view_window_char_limit


def file_limits(max_files_open: int | None, view_chars: int | None, context_window: int | None) -> FileLimits:
    """The agent's own settings where it has them, else Letta's defaults for its context window."""
    default_open, default_chars = _default_limits(context_window)
    return FileLimits(max_files_open or default_open, view_chars or default_chars)


def _default_limits(context_window: int | None) -> tuple[int, int]:
    if not context_window:
        return _UNKNOWN_WINDOW_LIMITS
    for largest, max_open, chars in _LIMITS_BY_CONTEXT_WINDOW:
        if context_window <= largest:
            return max_open, chars
    return _LARGEST_WINDOW_LIMITS


def file_lines(content: str) -> list[str]:
    """The file's lines: split on "\\n"; a final newline ends the last line rather than starting one."""
    if not content:
        return []
    return content.removesuffix("\n").split("\n")


@dataclass(frozen=True)
class Window:
    """The text of an open file's view and the lines it shows (None when the file has no lines);
    `cut`: not every line asked for fits, and the text ends saying how to read on."""

    text: str
    start_line: int | None
    end_line: int | None
    total_lines: int
    cut: bool = False


def render_window(content: str, *, view_chars: int, start_line: int = 1, length: int | None = None) -> Window:
    """Lines `start_line`.. (at most `length` of them), each as ``{n}: {line}``, under a header that
    says which lines are in view: as many whole lines as fit in `view_chars` together with the
    header and, when not all requested lines fit, a last line saying how to read on. A first line
    too long for the view on its own is shown cut. `start_line` must be a line of the file (or 1)."""
    lines = file_lines(content)
    total = len(lines)
    if not 1 <= start_line <= max(total, 1):
        raise ValueError(f"start_line {start_line} is outside 1..{total}")
    wanted_end = total if length is None else min(total, start_line + length - 1)
    whole_file = start_line == 1 and length is None
    shown: list[str] = []
    used = 0  # characters of `shown`, with their newlines
    for number in range(start_line, wanted_end + 1):
        numbered = f"{number}: {lines[number - 1]}"
        if _size(start_line, number, wanted_end, total, whole_file, view_chars, used + len(numbered) + 1) > view_chars:
            break
        shown.append(numbered)
        used += len(numbered) + 1
    if not shown and wanted_end >= start_line:
        return _cut_line_window(lines, start_line, wanted_end, view_chars)
    end = start_line + len(shown) - 1
    parts = [_header(start_line, end, total, whole_file), *shown]
    if end < wanted_end:
        parts.append(_read_on_note(end, wanted_end, view_chars))
    return Window("\n".join(parts), start_line if shown else None, end if shown else None, total, end < wanted_end)


def _size(start: int, end: int, wanted_end: int, total: int, whole_file: bool, view_chars: int, lines_size: int) -> int:
    note = len(_read_on_note(end, wanted_end, view_chars)) + 1 if end < wanted_end else 0
    return len(_header(start, end, total, whole_file)) + lines_size + note


def _header(start: int, end: int, total: int, whole_file: bool) -> str:
    if whole_file and end == total:
        return f"[Viewing file start (out of {total} lines)]"
    return f"[Viewing lines {start} to {end} (out of {total} lines)]"


def _read_on_note(last_shown: int, wanted_end: int, view_chars: int) -> str:
    return (
        f"...[TRUNCATED] {_lines(last_shown + 1, wanted_end)} did not fit in this file's view ({view_chars} characters); "
        f"to read on, call open_files with offset={last_shown}."
    )


def _lines(first: int, last: int) -> str:
    return f"Line {first}" if first == last else f"Lines {first} to {last}"


def _cut_line_window(lines: Sequence[str], number: int, wanted_end: int, view_chars: int) -> Window:
    """Line `number` alone is longer than the view: as much of it as fits, and what to do next."""
    note = f"...[TRUNCATED] Line {number} is longer than this file's view ({view_chars} characters) and is cut."
    if number < wanted_end:
        note += f" {_lines(number + 1, wanted_end)} did not fit; to read on, call open_files with offset={number}."
    header = f"[Viewing lines {number} to {number} (out of {len(lines)} lines)]"
    prefix = f"{number}: "
    room = max(view_chars - len(header) - len(prefix) - len(note) - 2, 0)
    return Window(f"{header}\n{prefix}{lines[number - 1][:room]}\n{note}", number, number, len(lines), cut=True)


@dataclass(frozen=True)
class FileView:
    """One attached file as the prompt lists it; `window` is the view's text when the file is open."""

    name: str
    is_open: bool
    window: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    total_lines: int | None = None


@dataclass(frozen=True)
class DirectoryView:
    """An attached folder and its processed files."""

    name: str
    description: str | None
    instructions: str | None
    files: tuple[FileView, ...] = ()


def render_directories(directories: Sequence[DirectoryView], limits: FileLimits) -> str:
    """The ``<directories>`` section (empty without attached folders): the open-file limits, then each
    folder with its description and instructions and each of its files, open or closed, with its
    metadata; only an open file has a ``<value>``."""
    if not directories:
        return ""
    open_count = sum(file.is_open for directory in directories for file in directory.files)
    lines = [
        "<directories>",
        "<file_limits>",
        f"- current_files_open={open_count}",
        f"- max_files_open={limits.max_files_open}",
        "</file_limits>",
    ]
    for directory in directories:
        lines.append(f'<directory name="{directory.name}">')
        if directory.description:
            lines.append(f"<description>{directory.description}</description>")
        if directory.instructions:
            lines.append(f"<instructions>{directory.instructions}</instructions>")
        for file in directory.files:
            lines += _file_section(file, limits.view_chars)
        lines.append("</directory>")
    lines.append("</directories>")
    return "\n".join(lines)


def _file_section(file: FileView, view_chars: int) -> list[str]:
    window = file.window if file.is_open and file.window is not None else None
    lines = [f'<file status="{"open" if window is not None else "closed"}" name="{file.name}">', "<metadata>"]
    lines += ["- read_only=true", f"- chars_current={len(window or '')}", f"- chars_limit={view_chars}"]
    if window is not None and file.start_line is not None:
        lines.append(f"- lines_in_view={file.start_line}-{file.end_line}")
    if file.total_lines is not None:
        lines.append(f"- total_lines={file.total_lines}")
    lines.append("</metadata>")
    if window is not None:
        lines += ["<value>", window, "</value>"]
    lines.append("</file>")
    return lines
