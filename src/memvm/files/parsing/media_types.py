"""Which files the server reads, and as what: an upload's media type from its name and the type its
client declared. The list is Letta's (services/file_processor/file_types.py) plus .docx and .log."""

import mimetypes
import re

from memvm.errors import UnsupportedMediaType

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

BY_EXTENSION = {
    ".pdf": PDF,
    ".docx": DOCX,
    ".txt": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".csv": "text/csv",
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".ts": "text/x-typescript",
    ".java": "text/x-java-source",
    ".cpp": "text/x-c++",
    ".cxx": "text/x-c++",
    ".c": "text/x-c",
    ".h": "text/x-c",
    ".cs": "text/x-csharp",
    ".php": "text/x-php",
    ".rb": "text/x-ruby",
    ".go": "text/x-go",
    ".rs": "text/x-rust",
    ".swift": "text/x-swift",
    ".kt": "text/x-kotlin",
    ".scala": "text/x-scala",
    ".r": "text/x-r",
    ".m": "text/x-objective-c",
    ".html": "text/html",
    ".htm": "text/html",
    ".css": "text/css",
    ".scss": "text/x-scss",
    ".sass": "text/x-sass",
    ".less": "text/x-less",
    ".vue": "text/x-vue",
    ".jsx": "text/x-jsx",
    ".tsx": "text/x-tsx",
    ".xml": "application/xml",
    ".yaml": "text/x-yaml",
    ".yml": "text/x-yaml",
    ".toml": "application/toml",
    ".ini": "text/x-ini",
    ".cfg": "text/x-conf",
    ".conf": "text/x-conf",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".ps1": "text/x-powershell",
    ".bat": "text/x-batch",
    ".cmd": "text/x-batch",
    ".dockerfile": "text/x-dockerfile",
    ".sql": "text/x-sql",
}
# Files known by their whole name rather than an extension.
_BY_NAME = {"dockerfile": "text/x-dockerfile"}
# Text under an application/* type that clients send for the extensions above.
_TEXT_ALIASES = frozenset(
    {"application/javascript", "application/x-yaml", "application/yaml", "application/x-ndjson", "application/x-jsonlines"}
)
TEXT_TYPES = frozenset(t for t in BY_EXTENSION.values() if t not in (PDF, DOCX)) | _TEXT_ALIASES | HTML_TYPES
SUPPORTED_TYPES = TEXT_TYPES | {PDF, DOCX}
SUPPORTED_EXTENSIONS = ", ".join(sorted(BY_EXTENSION))

# Python's built-in table only, not the host's /etc/mime.types: the same upload is read the same way
# on every server. It adds a few text types the table above lacks (.tsv, .pl, .mjs, .ics, ...).
_BUILT_IN_TYPES = mimetypes.MimeTypes()


def media_type_for(filename: str, declared: str | None) -> str:
    """The type to read an upload as. The name's extension decides when it is one of the list, as
    clients often declare a generic type (application/octet-stream); else the declared type, else
    the one the extension usually means, if it is a type this server reads."""
    name = re.split(r"[/\\]", filename)[-1].lower()
    extension = name[name.rfind(".") :] if "." in name else ""
    known = BY_EXTENSION.get(extension) or _BY_NAME.get(name)
    if known:
        return known
    for candidate in (_essence(declared), _BUILT_IN_TYPES.guess_type(name, strict=False)[0]):
        if candidate and is_supported(candidate):
            return candidate
    shown = f" ({_essence(declared)})" if declared else ""
    raise UnsupportedMediaType(
        f"Cannot read {filename!r}{shown}: this server reads files with the extensions {SUPPORTED_EXTENSIONS}, "
        "and any text/* file."
    )


def is_supported(media_type: str) -> bool:
    return media_type.startswith("text/") or media_type in SUPPORTED_TYPES


def _essence(declared: str | None) -> str:
    """`text/plain; charset=utf-8` → `text/plain`."""
    return (declared or "").split(";")[0].strip().lower()
