"""SQLAlchemy event listeners held for the length of a block, for tests that watch what is sent."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event


@contextmanager
def listening(target: Any, *handlers: tuple[str, Callable[..., Any]]) -> Iterator[None]:
    """Each (event name, handler) listens on `target` while the block runs."""
    for name, handler in handlers:
        event.listen(target, name, handler)
    try:
        yield
    finally:
        for name, handler in handlers:
            event.remove(target, name, handler)
