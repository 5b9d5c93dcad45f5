"""Text files as they are: decoded, with LF line ends, nothing else changed (a reformatted JSON or
CSV would no longer have the line numbers its owner knows)."""

from memvm.files.parsing.errors import ParseError

# What Windows-1252 (a superset of Latin-1's printable characters) shares with its look-alikes: short
# Western text fits many single-byte encodings equally well, and it is the likeliest of them.
_WESTERN = "cp1252"


def decoded(data: bytes) -> str:
    """UTF-8 (a byte-order mark dropped), else the encoding that fits best. Text with a NUL is
    refused: it is a binary file, and PostgreSQL's text cannot hold one."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = _guessed(data)
    text = unix_lines(text)
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ParseError(f"the file has a NUL character on line {line}: it looks like a binary file, not text.")
    return text


def unix_lines(text: str) -> str:
    """Windows (CRLF) and old Mac (CR) line ends as LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _guessed(data: bytes) -> str:
    # Imported on first use (30 ms): every HTTP process imports this package, few ever read a non-UTF-8 file.
    import charset_normalizer

    matches = charset_normalizer.from_bytes(data)
    if not matches:
        raise ParseError("the file is neither UTF-8 nor text in another known encoding: it looks like a binary file.")
    least_chaos = min(match.chaos for match in matches)
    even = (match for match in matches if match.chaos == least_chaos and _WESTERN in match.could_be_from_charset)
    return str(next(even, matches.best()))
