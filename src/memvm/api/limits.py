"""A cap on request body size: larger bodies get 413 before they are read into memory."""

import json

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    """ASGI middleware: refuses a declared Content-Length over the cap at once, and stops reading a
    chunked body as soon as it passes the cap."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _too_large(send, self.max_bytes)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, detail=_detail(self.max_bytes))
            return message

        await self.app(scope, limited, send)


def _detail(max_bytes: int) -> str:
    return f"The request body is larger than {max_bytes} bytes (MEMVM_MAX_REQUEST_BYTES); send less per request."


async def _too_large(send: Send, max_bytes: int) -> None:
    headers = [(b"content-type", b"application/json"), (b"x-should-retry", b"false")]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": _detail(max_bytes)}).encode()})
