"""An upload's bytes to its text, by media type (media_types.py decides the type)."""

from memvm.files.parsing.errors import ParseError
from memvm.files.parsing.html import page_text
from memvm.files.parsing.isolation import read_in_child
from memvm.files.parsing.media_types import DOCX, HTML_TYPES, PDF, is_supported
from memvm.files.parsing.text import decoded, unix_lines


def parse_document(data: bytes, media_type: str) -> str:
    """The text, lines joined by LF. Raises ParseError saying why it cannot be read. Blocks: a PDF
    or DOCX is read in a child process (isolation.py), for up to its time limit."""
    if media_type in (PDF, DOCX):
        # A NUL in a PDF's or document's text is an extraction artefact, not a sign of a binary file.
        return unix_lines(read_in_child(data, media_type)).replace("\x00", "")
    if media_type in HTML_TYPES:
        return page_text(decoded(data))
    if is_supported(media_type):
        return decoded(data)
    raise ParseError(f"files of type {media_type} cannot be read as text.")
