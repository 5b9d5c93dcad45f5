"""A file's text cut into chunks, the unit of search: runs of whole lines numbered as the file numbers
them, so a hit can say file:line. Unlike Letta's sentence splitter, no overlap and no stripping: the
chunks of a file hold each of its characters once, blank lines included. Pure."""

from dataclasses import dataclass

from memvm.files.parsing.text import unix_lines
from memvm.memory.files_view import file_lines


@dataclass(frozen=True)
class Chunk:
    seq: int  # 0, 1, … in the file's order
    start_line: int  # 1-based, the file's own numbering
    end_line: int  # inclusive; equal to start_line for a piece of a long line
    text: str  # the lines joined by LF


def lines_of(text: str) -> list[str]:
    """The lines as an editor numbers them (CRLF and CR end a line too): the numbering of every
    window, grep hit and search result."""
    return file_lines(unix_lines(text))


def chunk_lines(text: str, max_chars: int) -> list[Chunk]:
    """Whole lines, as many as fit in max_chars (the LFs between them counted); a line longer than that
    is cut into pieces of at most max_chars that all carry its number. A chunk of blank lines alone
    is left out: there is nothing in it to find."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, not {max_chars}.")
    runs = _Runs(max_chars)
    for number, line in enumerate(lines_of(text), start=1):
        runs.add(number, line)
    runs.flush()
    return runs.chunks


class _Runs:
    """The chunks so far, and the run of lines that will be the next."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.chunks: list[Chunk] = []
        self.lines: list[str] = []
        self.start = 0
        self.size = 0

    def add(self, number: int, line: str) -> None:
        if len(line) > self.max_chars:
            self.flush()
            for piece in _pieces(line, self.max_chars):
                self._emit(number, number, piece)
            return
        if self.lines and self.size + 1 + len(line) > self.max_chars:
            self.flush()
        if not self.lines:
            self.start = number
        self.size += len(line) + (1 if self.lines else 0)
        self.lines.append(line)

    def flush(self) -> None:
        if self.lines:
            self._emit(self.start, self.start + len(self.lines) - 1, "\n".join(self.lines))
        self.lines, self.size = [], 0

    def _emit(self, start_line: int, end_line: int, text: str) -> None:
        if text.strip():
            self.chunks.append(Chunk(len(self.chunks), start_line, end_line, text))


def _pieces(line: str, max_chars: int) -> list[str]:
    """The line in pieces of at most max_chars, each cut after a space or tab when one falls in the
    window's second half (a word cut in two is lost to full-text search), else at max_chars."""
    pieces = []
    start = 0
    while len(line) - start > max_chars:
        window = line[start : start + max_chars]
        cut = max(window.rfind(" "), window.rfind("\t")) + 1
        if cut <= max_chars // 2:
            cut = max_chars
        pieces.append(window[:cut])
        start += cut
    pieces.append(line[start:])
    return pieces
