"""Prefixed resource ids (`agent-<uuid4>`) as the Letta API uses them."""

import re
import uuid
from collections.abc import Callable

_UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


def id_pattern(prefix: str) -> str:
    """Anchored regex for path/body validation of `<prefix>-<uuid4>` ids."""
    return rf"^{prefix}-{_UUID4}$"


def is_valid_id(prefix: str, value: str) -> bool:
    return re.fullmatch(id_pattern(prefix), value) is not None


def ids_check(prefix: str, kind: str) -> Callable[[list[str] | None], list[str] | None]:
    """A pydantic validator of a list of `<prefix>-<uuid4>` ids that names the first malformed one."""

    def check(ids: list[str] | None) -> list[str] | None:
        for value in ids or ():
            if not is_valid_id(prefix, value):
                raise ValueError(f"{value!r} is not a {kind} id; expected '{prefix}-<uuid4>'")
        return ids

    return check
