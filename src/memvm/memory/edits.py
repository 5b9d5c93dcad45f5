"""Text-edit semantics of the memory tools: compute a block's new value, or refuse the edit.

Everything here is a pure function of its arguments: no I/O, no clock. Read-only and
character-limit checks belong to the write path, not here. Every refusal raises
``MemoryEditError`` whose message is shown to the model, so it says what is wrong and
how to fix it.

A value's lines are ``value.split("\\n")``, except that an empty value has no lines:
the numbering matches what the line-numbered prompt view shows (``1→ first``).
Values are never rewritten beyond the requested edit (tabs, trailing newlines and
unicode are kept as they are).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from memvm.errors import MemoryEditError
from memvm.memory.compiler import LINE_NUMBER_WARNING

# A display-only prefix such as "12→ " at the start of any line.
_LINE_NUMBER_PREFIX = re.compile(r"^[ \t]*\d+→[ \t]*", re.MULTILINE)
# The whole banner, or either of its sentences when copied alone.
_BANNER_PARTS = tuple(part.strip() for part in LINE_NUMBER_WARNING.removeprefix("# NOTE:").split(". ") if part.strip())
_MEMORIES_ROOT = "memories"


def _lines(value: str) -> list[str]:
    return value.split("\n") if value else []


def _join(lines: list[str]) -> str:
    return "\n".join(lines)


# --- paths and guards ---------------------------------------------------------------------------


def label_from_path(path: str) -> str:
    """Map a ``memory`` tool path to a block label, the same way for every command.

    "/memories/system/a.md", "memories/system/a", "system/a/" and "system/a" all give
    "system/a": an optional leading "/memories/" (or "memories/") is dropped, then
    surrounding "/" and a trailing ".md". Inner "/" is kept. Raises MemoryEditError
    when nothing is left.
    """
    text = path.strip()
    if text.startswith("/"):
        text = text.lstrip("/")
        if text == _MEMORIES_ROOT:
            text = ""
    text = text.removeprefix(f"{_MEMORIES_ROOT}/").strip("/").removesuffix(".md").strip("/")
    if not text:
        raise MemoryEditError(
            f"Path {path!r} does not name a memory block. "
            "Use a block label such as 'human' or a path such as '/memories/human' or '/memories/system/notes'."
        )
    return text


def check_no_line_numbers(field: str, text: str) -> None:
    """Raise MemoryEditError if ``text`` carries a ``N→`` line prefix or the line-number warning banner."""
    if _LINE_NUMBER_PREFIX.search(text):
        raise MemoryEditError(
            f"{field} contains a line number prefix, which is not allowed. Do not include line numbers "
            "when calling memory tools (line numbers are for display purposes only)."
        )
    if any(part in text for part in _BANNER_PARTS):
        raise MemoryEditError(
            f"{field} contains the line number warning banner, which is not allowed. "
            "Remove the NOTE about line numbers and pass only the memory text itself."
        )


def _check_patch(patch: str) -> None:
    """Refuse line numbers or the banner anywhere in a patch, including right after a '+'/'-' marker."""
    check_no_line_numbers("Patch", patch)
    after_markers = (line[1:] for line in patch.splitlines() if line.startswith(("+", "-")))
    check_no_line_numbers("Patch", "\n".join(after_markers))


def _check_old_given(field: str, old: str) -> None:
    if not old:
        raise MemoryEditError(
            f"{field} is empty, so there is nothing to find. Pass the exact text to replace, "
            "copied from the memory block; to add text without replacing any, use an insert or append tool."
        )


# --- single-block edits -------------------------------------------------------------------------


def append(value: str, content: str) -> str:
    """``core_memory_append``: ``content`` on a new line after ``value``; just ``content`` if ``value`` is empty.

    Raises MemoryEditError if ``content`` carries line numbers or the warning banner.
    """
    check_no_line_numbers("content", content)
    return f"{value}\n{content}" if value else content


def replace_all(label: str, value: str, old: str, new: str) -> str:
    """``core_memory_replace``: replace every occurrence of ``old`` by ``new`` (``new=""`` deletes).

    Raises MemoryEditError if ``old`` is empty or absent, or if either string carries line numbers.
    """
    check_no_line_numbers("old_content", old)
    check_no_line_numbers("new_content", new)
    _check_old_given("old_content", old)
    if old not in value:
        raise MemoryEditError(
            f"Old content '{old}' not found in memory block '{label}'. "
            "Copy the text exactly as it appears in the block (same spacing and punctuation, without line numbers)."
        )
    return value.replace(old, new)


def replace_unique(label: str, value: str, old: str, new: str) -> str:
    """``memory_replace``: replace the single occurrence of ``old`` by ``new``; tabs are kept as they are.

    Raises MemoryEditError if ``old`` is empty, occurs 0 or more than 1 times (overlapping
    occurrences count), or if either string carries line numbers or the warning banner.
    """
    check_no_line_numbers("old_string", old)
    check_no_line_numbers("new_string", new)
    _check_old_given("old_string", old)
    starts = _occurrences(value, old)
    if not starts:
        raise MemoryEditError(
            f"No replacement was performed, old_string `{old}` did not appear verbatim in memory block with label `{label}`."
        )
    if len(starts) > 1:
        lines = sorted({value.count("\n", 0, start) + 1 for start in starts})
        raise MemoryEditError(
            f"No replacement was performed. Multiple occurrences of old_string `{old}` in lines {lines}. "
            "Please ensure it is unique."
        )
    start = starts[0]
    return value[:start] + new + value[start + len(old) :]


def _occurrences(text: str, needle: str) -> list[int]:
    """Start offsets of every (possibly overlapping) occurrence of a non-empty ``needle``."""
    starts, index = [], text.find(needle)
    while index != -1:
        starts.append(index)
        index = text.find(needle, index + 1)
    return starts


def insert_lines(label: str, value: str, text: str, insert_line: int | None = None, *, field: str = "new_string") -> str:
    """``memory_insert``: put ``text``'s lines after line ``insert_line`` of ``value``.

    0 inserts at the top; -1 or None appends at the end. An empty block has 0 lines,
    so inserting into it gives exactly ``text``. ``field`` names the argument in errors.
    Raises MemoryEditError if ``insert_line`` is outside [0, number of lines] and not -1,
    or if ``text`` carries line numbers or the warning banner.
    """
    check_no_line_numbers(field, text)
    lines = _lines(value)
    if insert_line is None or insert_line == -1:
        insert_line = len(lines)
    elif not 0 <= insert_line <= len(lines):
        raise MemoryEditError(
            f"Invalid `insert_line` parameter: {insert_line}. It should be within the range of lines of the "
            f"memory block: [0, {len(lines)}], or -1 to append to the end of the memory block."
        )
    return _join(lines[:insert_line] + text.split("\n") + lines[insert_line:])


def rethink(value: str, new_value: str) -> str:
    """``memory_rethink``: ``new_value`` replaces ``value`` entirely.

    Raises MemoryEditError if ``new_value`` carries line numbers or the warning banner.
    """
    del value  # the old value plays no part; it is taken for symmetry with the other edits
    check_no_line_numbers("new_memory", new_value)
    return new_value


# --- patches ------------------------------------------------------------------------------------


def apply_patch(label: str, value: str, patch: str) -> str:
    """``memory_apply_patch`` (single block): apply a simplified unified diff to ``value``.

    Hunks are separated by ``@@`` lines; ``' '`` is context, ``'-'`` removes, ``'+'`` adds,
    a blank line is an empty context line (blank lines closing a hunk are dropped), lines
    starting ``*** ``, ``---`` or ``+++`` and any other lines are ignored. Hunks apply in
    order; each hunk's context and removed lines must match exactly one contiguous run of
    lines, and a hunk with only ``+`` lines appends them at the end. Tabs are kept.
    Raises MemoryEditError for line numbers (also right after a ``+``/``-`` marker) or the
    banner anywhere in the patch, for a patch without hunks, and for a hunk that matches
    nowhere or in several places (the message names the hunk and, if ambiguous, the lines).
    """
    _check_patch(patch)
    hunks = _parse_hunks(patch)
    if not hunks:
        raise MemoryEditError("No applicable hunks found in patch. Ensure lines start with ' ', '-', or '+'.")
    lines = _lines(value)
    for number, (expected, replacement) in enumerate(hunks, start=1):
        lines = _apply_hunk(lines, expected, replacement, f"label `{label}`, hunk {number} of {len(hunks)}")
    return _join(lines)


def _parse_hunks(patch: str) -> list[tuple[list[str], list[str]]]:
    """Each hunk as (lines it expects to find, lines that replace them)."""
    hunks: list[list[str]] = [[]]
    for line in patch.splitlines():
        if line.startswith(("*** ", "---", "+++")):
            continue
        if line.startswith("@@"):
            hunks.append([])
        elif line.startswith((" ", "-", "+")):
            hunks[-1].append(line)
        elif not line.strip():
            hunks[-1].append("")  # blank: an empty context line
    parsed = []
    for hunk in hunks:
        while hunk and hunk[-1] == "":
            hunk.pop()  # blank lines that merely separate hunks
        if hunk:
            expected = [line[1:] for line in hunk if not line.startswith("+")]
            replacement = [line[1:] for line in hunk if not line.startswith("-")]
            parsed.append((expected, replacement))
    return parsed


def _apply_hunk(lines: list[str], expected: list[str], replacement: list[str], where: str) -> list[str]:
    if not expected:
        return lines + replacement
    size = len(expected)
    matches = [i for i in range(len(lines) - size + 1) if lines[i : i + size] == expected]
    if not matches:
        sample = "\n".join(expected[:4])
        raise MemoryEditError(
            f"Failed to apply patch: expected hunk context not found in the memory block ({where}). "
            "Verify the target lines exist exactly as written (same spacing, no line numbers) and try providing "
            f"more context. Expected start:\n{sample}"
        )
    if len(matches) > 1:
        starts = [i + 1 for i in matches]
        raise MemoryEditError(
            f"Failed to apply patch: hunk context matched multiple places in the memory block ({where}, "
            f"at lines {starts}). Please add more unique surrounding context to disambiguate."
        )
    start = matches[0]
    return lines[:start] + replacement + lines[start + size :]


@dataclass(frozen=True)
class PatchOp:
    """One operation of a multi-block patch, in the order written.

    add: ``body`` is the new block's content, ``description`` its optional description;
    update: ``body`` is the diff for ``apply_patch``; delete: ``label`` only;
    move: rename ``label`` to ``new_label``.
    """

    kind: Literal["add", "delete", "update", "move"]
    label: str
    body: str = ""
    description: str | None = None
    new_label: str | None = None


_ADD, _DELETE, _UPDATE, _MOVE = "*** Add Block:", "*** Delete Block:", "*** Update Block:", "*** Move to:"
_HEADERS = (_ADD, _DELETE, _UPDATE, _MOVE)
_ENVELOPE = ("*** Begin Patch", "*** End Patch")


def is_multi_block_patch(patch: str) -> bool:
    """True if any line is an Add/Delete/Update Block or Move to header."""
    return any(line.startswith(_HEADERS) for line in patch.splitlines())


def parse_multi_block_patch(patch: str) -> list[PatchOp]:
    """Split a multi-block patch into operations, in order; labels go through ``label_from_path``.

    ``*** Add Block: L`` takes an optional ``Description: …`` line, then ``+`` lines as
    content (blank lines are empty content lines; trailing ones are dropped).
    ``*** Update Block: L`` takes every following line up to the next header as its diff.
    ``*** Delete Block: L`` takes nothing. ``*** Move to: NEW`` renames the block named by
    the previous Add/Update header (or an earlier Move); it is emitted after that header's
    operation so the diff applies before the rename, and an update with an empty diff
    followed by a move is a pure rename. Begin/End Patch lines are ignored.
    Raises MemoryEditError for line numbers or the banner, an empty label, a Move with no
    previous Add/Update header, or a patch without operations.
    """
    _check_patch(patch)
    parser = _MultiBlockParser()
    for line in patch.splitlines():
        parser.feed(line)
    ops = parser.finish()
    if not ops:
        raise MemoryEditError(
            "No operations found. Provide at least one of: *** Add Block: <label>, *** Delete Block: <label>, "
            "*** Update Block: <label> (optionally followed by *** Move to: <new label>)."
        )
    return ops


class _MultiBlockParser:
    """Line-by-line state for ``parse_multi_block_patch``."""

    def __init__(self) -> None:
        self.ops: list[PatchOp] = []
        self.kind: str | None = None  # "add"/"update" while collecting a body, else None
        self.label: str | None = None  # label of the last Add/Update header, as renamed by moves
        self.description: str | None = None
        self.body: list[str] = []
        self.moves: list[PatchOp] = []  # emitted after the header's own operation

    def feed(self, line: str) -> None:
        if line.strip() in _ENVELOPE:
            return
        header = next((h for h in _HEADERS if line.startswith(h)), None)
        if header == _MOVE:
            self._move(line)
        elif header is not None:
            self.finish()
            label = _header_label(header, line)
            if header == _DELETE:
                self.ops.append(PatchOp("delete", label))
            else:
                self.kind, self.label = ("add" if header == _ADD else "update"), label
        elif self.kind == "update":
            self.body.append(line)
        elif self.kind == "add":
            self._add_line(line)

    def _move(self, line: str) -> None:
        new_label = _header_label(_MOVE, line)
        if self.label is None:
            raise MemoryEditError(
                f"'{line.strip()}' has no block to rename. Put it right after the '*** Update Block: <label>' "
                "header of the block to rename (a deleted block cannot be renamed)."
            )
        self.moves.append(PatchOp("move", self.label, new_label=new_label))
        self.label = new_label

    def _add_line(self, line: str) -> None:
        if not self.body and self.description is None and line.startswith("Description:"):
            self.description = line.removeprefix("Description:").strip()
        elif line.startswith("+"):
            self.body.append(line[1:])
        elif not line.strip():
            self.body.append("")

    def finish(self) -> list[PatchOp]:
        """Emit the operation being collected, then its moves; return every operation so far."""
        first_label = self.moves[0].label if self.moves else self.label
        if first_label is None:  # no section header yet: nothing is being collected
            return self.ops
        if self.kind == "add":
            body = _join(self.body).rstrip("\n")
            self.ops.append(PatchOp("add", first_label, body=body, description=self.description))
        elif self.kind == "update" and (any(line.strip() for line in self.body) or not self.moves):
            self.ops.append(PatchOp("update", first_label, body=_join(self.body)))
        self.ops.extend(self.moves)
        self.kind, self.label, self.description, self.body, self.moves = None, None, None, [], []
        return self.ops


def _header_label(header: str, line: str) -> str:
    raw = line[len(header) :].strip()
    if not raw:
        raise MemoryEditError(f"'{header}' must be followed by a non-empty block label, e.g. '{header} human'.")
    return label_from_path(raw)


# --- display ------------------------------------------------------------------------------------


def view(label: str, value: str) -> str:
    """The ``memory`` tool's ``view``: a header naming the block and its line count, then ``N→ line`` lines.

    Numbering matches the line-numbered prompt view; an empty block gets a header saying so.
    """
    lines = _lines(value)
    if not lines:
        return f"Memory block '{label}' is empty."
    noun = "line" if len(lines) == 1 else "lines"
    numbered = [f"{number}→ {line}" for number, line in enumerate(lines, start=1)]
    return _join([f"Memory block '{label}' ({len(lines)} {noun}):", *numbered])


def unified_diff(label: str, old: str, new: str, context: int = 2) -> str:
    """A unified diff of ``old`` → ``new`` with ``context`` lines around each change, for tool confirmations."""
    diff = difflib.unified_diff(
        _lines(old), _lines(new), fromfile=f"{label} (before)", tofile=f"{label} (after)", n=context, lineterm=""
    )
    return _join(list(diff)) or f"No changes to memory block '{label}'."
