"""Server-Sent Events as the Letta SDK reads them: `data: <json>` per event, `event: error` before an
error_message, and `data: [DONE]` at the end."""

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any


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
