"""Server-Sent Events as the Letta SDK reads them: `data: <json>` per event, `event: error` before an
error_message, and `data: [DONE]` at the end."""

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

# How /openapi.json documents a 200 that is an event stream, each event as `itemSchema` describes
# it (as FastAPI documents its own event streams). Routes that always stream declare
# `response_class=StreamingResponse` too, so FastAPI documents no JSON body for them.
_EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "description": "`error` before an error_message; absent otherwise"},
        "data": {"type": "string", "description": "one message as JSON, or `[DONE]` at the end"},
    },
    "required": ["data"],
}
_EVENTS = {"text/event-stream": {"itemSchema": _EVENT}}
EVENT_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: `data: <message JSON>` per event (`event: error` before one that is an "
        "error), then `data: [DONE]`.",
        "content": _EVENTS,
    }
}
JSON_OR_EVENT_STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The turn's result; with `streaming: true`, Server-Sent Events as /messages/stream sends them.",
        "content": _EVENTS,
    }
}


async def sse(first: dict[str, Any] | None, events: AsyncGenerator[dict[str, Any], None]) -> AsyncIterator[str]:
    async with aclosing(events):
        if first is not None:
            yield _data(first)
        async for event in events:
            if event["message_type"] == "error_message":
                yield f"event: error\n{_data(event)}"
            else:
                yield _data(event)
    yield "data: [DONE]\n\n"


def _data(event: dict[str, Any]) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False, default=str)}\n\n"
