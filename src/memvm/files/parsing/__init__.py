"""Uploaded documents to text: which files are read and as what type (media_types.py), and their
text (documents.py). Pure: bytes in, text out, no database. PDF and DOCX are read in a child process
under limits (isolation.py, child.py); the libraries that read them (pypdfium2, python-docx, lxml)
are imported only there and only by this package (the import contract in pyproject.toml)."""

from memvm.files.parsing.documents import parse_document
from memvm.files.parsing.errors import ParseError
from memvm.files.parsing.media_types import SUPPORTED_EXTENSIONS, media_type_for

__all__ = ["SUPPORTED_EXTENSIONS", "ParseError", "media_type_for", "parse_document"]
