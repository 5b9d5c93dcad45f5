"""The file tools' texts as Letta 0.16.8 words them (its files tool executor), with real line numbers
(pure). What the tools found comes from files/search.py."""

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memvm.errors import InvalidInput

GREP_PAGE_SIZE = 20
MAX_COLLECTED = 1000  # matches grep_files collects at most; pages are cut from them
MAX_PATTERN_CHARS = 1000
PASSAGE_LINES = 20  # lines of a semantic hit shown
_REGEX_SIGNS = frozenset("^$()[]{}\\+")
_PYTHON_WORD_BOUNDARY = re.compile(r"(?<!\\)((?:\\\\)*)\\b")


def checked_pattern(pattern: str) -> str:
    pattern = pattern.strip()
    if not pattern:
        raise InvalidInput("Empty search pattern provided; pass a keyword or regular expression.")
    return _short(pattern)


def postgres_regex(pattern: str) -> str:
    """The pattern for PostgreSQL, where `\\b` is a backspace: models write Python's (Letta's) word
    boundary, which PostgreSQL spells `\\y`. An escaped backslash before a `b` stays as it is."""
    return _PYTHON_WORD_BOUNDARY.sub(r"\1\\y", pattern)


def include_regex(include: str | None) -> str | None:
    """`include` as a PostgreSQL filename regex: a glob (`*.md`, `docs/*`) is turned into one, as
    Letta does; anything else is a regex already."""
    include = _short(include.strip()) if include else None
    if not include:
        return None
    if "*" in include and not _REGEX_SIGNS & set(include):
        include = include.replace(".", r"\.").replace("*", ".*").replace("?", ".") + "$"
    return postgres_regex(include)


def _short(pattern: str) -> str:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(f"Pattern too complex: {len(pattern)} chars > {MAX_PATTERN_CHARS} limit")
    return pattern


@dataclass(frozen=True)
class GrepMatch:
    file_name: str
    line: int


@dataclass(frozen=True)
class GrepPage:
    """A grep's matches (in file name, then line order; one more than MAX_COLLECTED if there were
    more) and the page of them to show."""

    pattern: str
    include: str | None
    found: Sequence[GrepMatch]
    offset: int
    context_lines: int

    @property
    def collected(self) -> Sequence[GrepMatch]:
        return self.found[:MAX_COLLECTED]

    @property
    def more_than_collected(self) -> bool:
        return len(self.found) > MAX_COLLECTED

    def shown(self) -> Sequence[GrepMatch]:
        return self.collected[self.offset : self.offset + GREP_PAGE_SIZE]

    def wanted(self) -> list[tuple[str, int, int]]:
        """(file, first, last line) of each shown match with its context."""
        return [(m.file_name, m.line - self.context_lines, m.line + self.context_lines) for m in self.shown()]

    def text(self, lines: Mapping[tuple[str, int], str]) -> str:
        """The tool's answer; `lines` holds the text of the shown matches' lines and context, by
        (file, line). Files are listed by match count, most first."""
        if not self.found:
            return f"No matches found for pattern: '{self.pattern}'" + (
                f" in files matching '{self.include}'" if self.include else ""
            )
        total = f"{MAX_COLLECTED}+" if self.more_than_collected else str(len(self.collected))
        if self.offset >= len(self.collected):
            return f"Offset {self.offset} is past the last match ({total} matches); use an offset below {len(self.collected)}."
        counts = Counter(match.file_name for match in self.collected)
        end = self.offset + len(self.shown())
        out = [
            f"Found {total} total matches across {len(counts)} files (showing matches {self.offset + 1}-{end} of {total})",
            "=" * 80,
            "\nFiles with matches:",
            *(f"  - {name}: {count} matches" for name, count in counts.most_common()),
            "",
            *(f"\n=== {m.file_name}:{m.line} ===\n" + "\n".join(self._context(m, lines)) for m in self.shown()),
            "",
            *self._next(end),
        ]
        return "\n".join(out)

    def _context(self, match: GrepMatch, lines: Mapping[tuple[str, int], str]) -> list[str]:
        numbers = range(match.line - self.context_lines, match.line + self.context_lines + 1)
        return [
            f"{'>' if n == match.line else ' '} {n}: {lines[match.file_name, n]}"
            for n in numbers
            if (match.file_name, n) in lines
        ]

    def _next(self, end: int) -> list[str]:
        if end < len(self.collected):
            hint = [f'To see more matches, call: grep_files(pattern="{self.pattern}", offset={end})']
            if self.more_than_collected:
                hint.append(
                    f"Note: Only the first {MAX_COLLECTED} matches were collected. There may be more matches beyond this limit."
                )
            return hint
        if self.more_than_collected:
            return ["Showing last page of collected matches. There may be more matches beyond the collection limit."]
        return ["No more matches to show."]


@dataclass(frozen=True)
class Passage:
    """A semantic hit: a chunk of a file and the lines it spans."""

    file_name: str
    start_line: int
    end_line: int
    text: str

    @property
    def where(self) -> str:
        lines = str(self.start_line) if self.start_line == self.end_line else f"{self.start_line}-{self.end_line}"
        return f"{self.file_name}:{lines}"


def passages_text(query: str, passages: Sequence[Passage]) -> str:
    """semantic_search_files' answer: the hits grouped by file (files in the order of their best hit),
    numbered, each with its first PASSAGE_LINES lines."""
    if not passages:
        return f"No semantic matches found for query: '{query}'"
    by_file: dict[str, list[Passage]] = {}
    for passage in passages:
        by_file.setdefault(passage.file_name, []).append(passage)
    ordered = [passage for group in by_file.values() for passage in group]
    files = len(by_file)
    summary = f"Found {len(ordered)} semantic matches in {files} file{'s' if files != 1 else ''} for query: '{query}'"
    return "\n".join([summary, "=" * len(summary), *(_passage(number, p) for number, p in enumerate(ordered, start=1))])


def _passage(number: int, passage: Passage) -> str:
    lines = passage.text.strip().splitlines()
    shown = [f"  {line}" for line in lines[:PASSAGE_LINES]]
    if len(lines) > PASSAGE_LINES:
        shown.append(f"  ... [truncated {len(lines) - PASSAGE_LINES} more lines]")
    return f"\n=== {passage.where} (passage #{number}) ===\n" + "\n".join(shown)
