"""One model call of a turn, whole or streamed token by token, that a cancel request can cut short.

A whole completion runs in its own task, raced against the run's cancel event; a stream is checked
between its pieces. Either way a cancelled call raises RunCancelled and nothing of the step is
stored (the step's transaction has not begun)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from memvm.llm.ports import ChatModel
from memvm.llm.types import Completion, ModelRequest, TextDelta


class RunCancelled(Exception):
    """The run was asked to stop (POST /v1/agents/{id}/messages/cancel)."""


async def call(
    model: ChatModel, request: ModelRequest, cancelled: asyncio.Event, *, stream_id: str | None, run_id: str
) -> AsyncIterator[dict[str, Any] | Completion]:
    """The Completion; when streaming (`stream_id`: the id the streamed message will be stored
    under), the text pieces first."""
    if stream_id is None:
        yield await complete(model, request, cancelled)
        return
    async for item in stream(model, request, cancelled, message_id=stream_id, run_id=run_id):
        yield item


async def complete(model: ChatModel, request: ModelRequest, cancelled: asyncio.Event) -> Completion:
    call = asyncio.ensure_future(model.complete(request))
    stop = asyncio.ensure_future(cancelled.wait())
    try:
        await asyncio.wait({call, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
    if not call.done() or call.cancelled():
        raise RunCancelled
    return call.result()


async def stream(
    model: ChatModel, request: ModelRequest, cancelled: asyncio.Event, *, message_id: str, run_id: str
) -> AsyncIterator[dict[str, Any] | Completion]:
    """Letta assistant_message pieces as the text arrives, then the Completion."""
    date = datetime.now(UTC).isoformat(timespec="seconds")
    async for item in model.stream(request):
        if cancelled.is_set():
            raise RunCancelled
        if isinstance(item, TextDelta):
            yield {
                "id": message_id,
                "date": date,
                "message_type": "assistant_message",
                "otid": f"{message_id}-0",
                "run_id": run_id,
                "content": item.text,
            }
        else:
            yield item
