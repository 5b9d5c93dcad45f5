"""A Word (.docx) document's text with python-docx: the body's paragraphs and tables in document
order, headings as Markdown `#` lines, a table row as its cells joined by " | ". Runs in the child
process only (child.py)."""

import io
import re
from collections.abc import Iterator, Sequence
from typing import TypeVar

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from memvm.files.parsing.errors import ParseError

# Password-protected Office files and old binary .doc files are OLE compound files, not zip archives.
_OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING = re.compile(r"Heading ([1-9])")
_Cell = TypeVar("_Cell")


def docx_text(data: bytes) -> str:
    if data.startswith(_OLE_SIGNATURE):
        raise ParseError(
            "the file is a password-protected Word document or an old binary .doc, not a .docx; "
            "save it as a .docx without a password and upload that."
        )
    document = docx.Document(io.BytesIO(data))
    # Paragraph.style searches every style for each paragraph: 24 s for 20,000 paragraphs. The style
    # ids read from each paragraph's XML and looked up in one table take under a second.
    style_names = {style.style_id: style.name or "" for style in document.styles}
    return "\n".join(line for block in document.iter_inner_content() for line in _lines(block, style_names))


def _lines(block: Paragraph | Table, style_names: dict[str, str]) -> Iterator[str]:
    if isinstance(block, Table):
        for row in block.rows:
            yield " | ".join(" ".join(cell.text.splitlines()) for cell in _distinct(row.cells))
        return
    level = _heading_level(style_names.get(block._p.style or "", ""))
    yield f"{'#' * level} {block.text}" if level and block.text.strip() else block.text


def _heading_level(style_name: str) -> int:
    if style_name == "Title":
        return 1
    match = _HEADING.fullmatch(style_name)
    return int(match.group(1)) if match else 0


def _distinct(cells: Sequence[_Cell]) -> Iterator[_Cell]:
    """A merged cell appears once: python-docx lists it under each grid column it spans."""
    previous = None
    for cell in cells:
        if cell is not previous:
            yield cell
        previous = cell
