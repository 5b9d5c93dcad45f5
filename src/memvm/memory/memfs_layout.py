"""MemFS layout: which repository file shows which memory block, and a block file's bytes.

Letta Code keeps an agent's memory as a git repository (MemFS, layout v1). This module is
the pure mapping between the two sides; it knows nothing of git objects or storage.

Paths. ``system/**.md`` files are in-context blocks. A bare label ``human`` lives in
``system/human.md``; every other label lives in ``<label>.md``. So ``human`` and
``system/human`` name the same file: ``label_of`` reads that file as the bare label, and
whoever lists an agent's files must keep two attached blocks from sharing one path.
Every other path (``reference/**``, ``skills/**``, anything not ``.md``) is a plain file
stored as pushed: Letta Code treats non-``system/`` memory as deferred, never in the prompt,
so a new ``reference/notes.md`` never becomes a block. An attached block whose label lies
outside ``system/`` (``projects/a``) still has a file (``block_path``); the caller finds it
among the agent's blocks by that path before asking ``label_of`` what a new file is
(``file_label`` does both).

Files. ``---``, ``key: value`` lines, ``---``, then the block's value verbatim, as Letta
Code writes them. Keys: ``description`` (one line), ``read_only`` and ``limit``. A key left
out means "unchanged": Letta Code's own edits drop ``limit:``, and a file that does not say
``read_only`` leaves the flag as it is (``read_only: false`` clears it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from memvm.errors import InvalidInput
from memvm.memory.rules import MAX_BLOCK_LIMIT, check_label

SYSTEM_DIR = "system"
ALLOWED_KEYS = ("description", "read_only", "limit")

_SUFFIX = ".md"
_FENCE = "---"
# The closing fence: a line that is exactly "---" (CRLF files too), possibly the file's last.
_CLOSING_FENCE = re.compile(r"^---\r?(?:\n|\Z)", re.MULTILINE)
_LINE_BREAK = re.compile(r"\r?\n")
_DIGITS = re.compile(r"[0-9]{1,10}")  # int() refuses very long digit strings
_ALLOWED_LIST = ", ".join(ALLOWED_KEYS)


class MemfsFileError(InvalidInput):
    """A pushed file memvm cannot take; ``str()`` is ``"<path>: <rule>"``, shown to the git user."""

    def __init__(self, path: str, rule: str) -> None:
        super().__init__(f"{path}: {rule}")
        self.path = path
        self.rule = rule


@dataclass(frozen=True)
class BlockFile:
    """What a block's file shows: the fields ``render`` writes."""

    description: str | None
    read_only: bool
    limit: int
    value: str


@dataclass(frozen=True)
class ParsedBlockFile:
    """A pushed block file. ``None`` fields were absent from the frontmatter: keep the block's own."""

    description: str | None
    read_only: bool | None
    limit: int | None
    value: str

    def apply_to(self, current: BlockFile) -> BlockFile:
        """The block as this file leaves it; for a new block pass the defaults as ``current``."""
        return BlockFile(
            description=current.description if self.description is None else self.description,
            read_only=current.read_only if self.read_only is None else self.read_only,
            limit=current.limit if self.limit is None else self.limit,
            value=self.value,
        )


# --- paths --------------------------------------------------------------------------------------


def block_path(label: str) -> str:
    """The repository path of a block's file: ``human`` → ``system/human.md``, ``a/b`` → ``a/b.md``."""
    if "/" not in label:
        return f"{SYSTEM_DIR}/{label}{_SUFFIX}"
    return f"{label}{_SUFFIX}"


def label_of(path: str) -> str | None:
    """The block label a new file at ``path`` names, or None when it is a plain stored file.

    ``system/human.md`` → ``human`` (bare, so it is an agent's classic ``human`` block);
    ``system/a/b.md`` → ``system/a/b``; ``reference/x.md``, ``skills/…``, ``system/x.txt`` → None.
    Raises MemfsFileError when a ``system/**.md`` path cannot be a block label.
    """
    prefix = f"{SYSTEM_DIR}/"
    if not (path.startswith(prefix) and path.endswith(_SUFFIX)):
        return None
    inner = path.removeprefix(prefix).removesuffix(_SUFFIX)
    label = inner if "/" not in inner else f"{prefix}{inner}"
    try:
        return check_label(label)
    except InvalidInput as error:
        raise MemfsFileError(
            path, f"files under {prefix} are memory blocks, so the name must make one. {error.message}"
        ) from None


def file_label(path: str, attached_labels: Iterable[str]) -> str | None:
    """The label of the block a pushed file at ``path`` writes, or None for a plain stored file.

    The attached block shown at ``path`` (``block_path``) comes first, so ``projects/a.md``
    edits an attached ``projects/a`` and ``system/human.md`` an attached ``system/human``;
    otherwise the label a new file there names (``label_of``). Should two attached labels
    share the path (``human`` and ``system/human``), the first in ``attached_labels`` wins.
    """
    return next((label for label in attached_labels if block_path(label) == path), None) or label_of(path)


# --- file contents ------------------------------------------------------------------------------


def render(file: BlockFile, *, default_limit: int) -> bytes:
    """The file's bytes: frontmatter (description, then ``read_only: true`` and ``limit`` when
    not the default), then the value verbatim. A description is written on one line, quoted
    as JSON only when its raw text would read back as something else (it starts and ends
    with a quote)."""
    lines = [_FENCE]
    if file.description is not None:
        lines.append(f"description: {_scalar(_one_line(file.description))}")
    if file.read_only:
        lines.append("read_only: true")
    if file.limit != default_limit:
        lines.append(f"limit: {file.limit}")
    lines.append(_FENCE)
    return ("\n".join(lines) + "\n" + file.value).encode()


def parse(path: str, data: bytes) -> ParsedBlockFile:
    """Read a pushed block file. Without a leading ``---`` line the whole file is the value.

    Raises MemfsFileError (naming ``path``) for text memvm cannot store or frontmatter it
    cannot read: not UTF-8, a NUL character, a frontmatter never closed, a line that is not
    ``key: value``, an unknown or repeated key, a bad ``read_only`` or ``limit``.
    """
    text = _decode(path, data)
    opening, newline, rest = text.partition("\n")
    if opening.removesuffix("\r") != _FENCE or not newline:
        return ParsedBlockFile(description=None, read_only=None, limit=None, value=text)
    closing = _CLOSING_FENCE.search(rest)
    if closing is None:
        raise MemfsFileError(
            path, f"frontmatter opened but never closed (missing closing {_FENCE}): add a line {_FENCE} after its last key"
        )
    fields = _fields(path, rest[: closing.start()])
    return ParsedBlockFile(
        description=fields.get("description"),
        read_only=_read_only(path, fields.get("read_only")),
        limit=_limit(path, fields.get("limit")),
        value=rest[closing.end() :],
    )


def _decode(path: str, data: bytes) -> str:
    try:
        text = data.decode()
    except UnicodeDecodeError as error:
        raise MemfsFileError(path, f"not UTF-8 text (invalid byte at offset {error.start}): save the file as UTF-8") from None
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise MemfsFileError(path, f"contains a NUL character (line {line}): memory files must be plain text")
    return text


def _fields(path: str, header: str) -> dict[str, str]:
    """``key: value`` lines (file line 2 onwards; ``header`` ends in a line break) to decoded values."""
    fields: dict[str, str] = {}
    for number, line in enumerate(_LINE_BREAK.split(header)[:-1], start=2):
        if not line.strip():
            continue
        key, colon, raw = line.partition(":")
        key = key.strip()
        if not colon:
            raise MemfsFileError(path, f"frontmatter line {number} is not 'key: value': {line!r} (keys: {_ALLOWED_LIST})")
        if key not in ALLOWED_KEYS:
            raise MemfsFileError(path, f"unknown frontmatter key {key!r} (allowed: {_ALLOWED_LIST})")
        if key in fields:
            raise MemfsFileError(path, f"duplicate frontmatter key {key!r} (line {number}): keep one")
        fields[key] = _storable(path, key, _unquote(raw.strip()))
    return fields


def _unquote(raw: str) -> str:
    """A JSON double-quoted or YAML single-quoted value decoded; anything else is taken as written."""
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            decoded: str = json.loads(raw)
        except ValueError:  # e.g. '"a" and "b"': Letta Code writes values unquoted
            return raw
        return decoded
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        inner = raw[1:-1]
        if "'" not in inner.replace("''", ""):
            return inner.replace("''", "'")
    return raw


def _storable(path: str, key: str, value: str) -> str:
    """A ``\\u`` escape may decode to what PostgreSQL text cannot hold: NUL or a lone surrogate."""
    if "\x00" in value or any("\ud800" <= char <= "\udfff" for char in value):
        raise MemfsFileError(path, f"{key} holds a NUL character or a lone surrogate (from a \\u escape), which cannot be stored")
    return value


def _read_only(path: str, value: str | None) -> bool | None:
    if value is None:
        return None
    if value not in ("true", "false"):
        raise MemfsFileError(path, f"read_only must be true or false, not {value!r}")
    return value == "true"


def _limit(path: str, value: str | None) -> int | None:
    if value is None:
        return None
    if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_BLOCK_LIMIT:
        raise MemfsFileError(path, f"limit must be a whole number of characters from 1 to {MAX_BLOCK_LIMIT}, not {value!r}")
    return int(value)


def _one_line(text: str) -> str:
    """As Letta Code writes a description: line breaks become spaces, ends trimmed."""
    return _LINE_BREAK.sub(" ", text).strip()


def _scalar(text: str) -> str:
    return text if _unquote(text) == text else json.dumps(text, ensure_ascii=False)
