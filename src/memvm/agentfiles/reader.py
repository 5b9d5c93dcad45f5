"""Reading an agent file as a stream (ijson), so that a long history is never held whole: one pass
builds everything but the messages (each agent's `messages` array becomes its length), and later
passes yield the messages one at a time. Each pass rewinds the (seekable) file.

Both formats Letta writes are read: the multi-entity format has its agents under `agents`, each
with its `messages`; the legacy single-agent format is one agent object with `messages` at the top.
"""

from collections.abc import Iterator
from typing import Any, Protocol

import ijson

from memvm.errors import InvalidInput

# Where each format keeps its messages: the array, and one message in it.
_CURRENT = ("agents.item.messages", "agents.item.messages.item")
_LEGACY = ("messages", "messages.item")
_AGENT_PREFIX = "agents.item"
_SCALARS = frozenset({"null", "boolean", "integer", "double", "number", "string"})


class Source(Protocol):
    """A binary file that can be read again from the start (an upload spooled to disk, a local file)."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


class UnreadableFile(InvalidInput):
    """The upload is not a JSON object (or not JSON at all)."""


def read_skeleton(stream: Source) -> dict[str, Any]:
    """The whole file except messages; each `messages` array is replaced by its item count."""
    stream.seek(0)
    builder = ijson.ObjectBuilder()
    events = _events(stream)
    for prefix, event, value in events:
        if event == "start_array" and prefix in (_CURRENT[0], _LEGACY[0]):
            builder.event("number", _count_items(events, prefix))
        else:
            builder.event(event, value)
    skeleton = getattr(builder, "value", None)
    if not isinstance(skeleton, dict):
        raise UnreadableFile("The file is not an agent file: expected a JSON object with `agents` (or a legacy agent).")
    return skeleton


def iter_messages(stream: Source, *, legacy: bool) -> Iterator[tuple[int, Any]]:
    """(index of the agent in the file, one message as parsed JSON), in file order."""
    stream.seek(0)
    item_prefix = _LEGACY[1] if legacy else _CURRENT[1]
    agent_index = 0 if legacy else -1
    events = _events(stream)
    for prefix, event, value in events:
        if not legacy and prefix == _AGENT_PREFIX and event == "start_map":
            agent_index += 1
        elif prefix == item_prefix and event in _SCALARS:
            yield agent_index, value
        elif prefix == item_prefix and event in ("start_map", "start_array"):
            yield agent_index, _build(events, event, value)


def _events(stream: Source) -> Iterator[tuple[str, str, Any]]:
    try:
        yield from ijson.parse(stream, use_float=True)
    except ijson.JSONError as error:
        reason = str(error).splitlines()[0]
        raise UnreadableFile(f"The file is not valid JSON ({reason}); upload the .af file as exported.") from None


def _count_items(events: Iterator[tuple[str, str, Any]], array_prefix: str) -> int:
    """Consume the array that just started; return how many items it had."""
    item_prefix = f"{array_prefix}.item"
    count = 0
    for prefix, event, _ in events:
        if prefix == array_prefix and event == "end_array":
            return count
        if prefix == item_prefix and (event in _SCALARS or event in ("start_map", "start_array")):
            count += 1
    return count


def _build(events: Iterator[tuple[str, str, Any]], first_event: str, first_value: Any) -> Any:
    """The container that `first_event` opened, built from the events up to its end."""
    builder = ijson.ObjectBuilder()
    builder.event(first_event, first_value)
    depth = 1
    for _, event, value in events:
        builder.event(event, value)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                break
    return builder.value
