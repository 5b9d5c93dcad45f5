"""A cap on request body size: larger bodies get 413 before they are read into memory."""

import json

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    """ASGI middleware: refuses a declared Content-Length over the cap at once, and stops reading a
    chunked body as soon as it passes the cap."""

    def __init__(self, app: ASGIApp, max_bytes: int, exceptions: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.exceptions = exceptions or {}  # path → its own cap (agent-file uploads stream to disk)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.exceptions.get(scope["path"], self.max_bytes)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            await _too_large(send, cap)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > cap:
                raise HTTPException(413, detail=_detail(cap))
            return message

        await self.app(scope, limited, send)


def _detail(max_bytes: int) -> str:
    return (
        f"The request body is larger than {max_bytes} bytes (MEMVM_MAX_REQUEST_BYTES, or MEMVM_MAX_AGENT_FILE_BYTES "
        "for agent-file imports); send less per request."
    )


async def _too_large(send: Send, max_bytes: int) -> None:
    headers = [(b"content-type", b"application/json"), (b"x-should-retry", b"false")]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": _detail(max_bytes)}).encode()})
