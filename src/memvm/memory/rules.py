"""Rules every block write obeys, whoever writes (REST or, later, the agent's tools)."""

import re

from memvm.errors import InvalidInput, LimitExceeded

DEFAULT_BLOCK_LIMIT = 100_000
MAX_BLOCK_LIMIT = 2_147_483_647  # the column is a 32-bit integer
MAX_VERSION = 2_147_483_647  # block versions are 32-bit integers too: no version is above it
MAX_LABEL_LENGTH = 100

DEFAULT_DESCRIPTIONS = {
    "human": "What you know about the person you are talking with: name, preferences, context. Keep it current.",
    "persona": "Who you are: your name, role, voice and how you behave. This is your own identity.",
}

# A label is a tag name in the prompt and a path in the git view: path segments of
# letters, digits, '_', '-' and '.', joined by single '/'.
_LABEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*")


def check_label(label: str) -> str:
    if len(label) > MAX_LABEL_LENGTH or not _LABEL.fullmatch(label):
        raise InvalidInput(
            f"Invalid block label {label!r}: use 1-{MAX_LABEL_LENGTH} characters of letters, digits, '_', '-', '.', "
            "optionally as a path with single '/' separators (e.g. 'human', 'system/project/notes')."
        )
    return label


def clean_value(value: str | None) -> str:
    """None means empty; NUL characters cannot be stored in PostgreSQL text, so they are dropped."""
    return (value or "").replace("\x00", "")


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_BLOCK_LIMIT:
        raise InvalidInput(f"Block limit must be between 1 and {MAX_BLOCK_LIMIT} characters (got {limit}).")
    return limit


def check_fits(label: str, value: str, limit: int) -> None:
    """Raise LimitExceeded naming both numbers if `value` is longer than `limit` characters."""
    if len(value) > limit:
        raise LimitExceeded(
            f"Value of block '{label}' is {len(value)} characters, over its limit of {limit}. "
            f"Shorten the value by {len(value) - limit} characters or raise the block's limit."
        )


def check_limit_holds_value(label: str, value: str, new_limit: int) -> None:
    """Raise LimitExceeded naming both numbers if `new_limit` is below the length of `value`."""
    if new_limit < len(value):
        raise LimitExceeded(
            f"Limit {new_limit} for block '{label}' is below its current value length of {len(value)} characters. "
            f"Use a limit of at least {len(value)} or shorten the value in the same request."
        )


def default_description(label: str, description: str | None) -> str | None:
    return description if description is not None else DEFAULT_DESCRIPTIONS.get(label)
