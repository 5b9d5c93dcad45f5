"""A cap on request body size: larger bodies get 413 before they are read into memory."""

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# What multipart adds around an uploaded file (boundaries, part headers, small form fields).
MULTIPART_ENVELOPE_BYTES = 64 * 1024


@dataclass(frozen=True)
class BodyCap:
    """The cap of the requests whose path fully matches `path`; `setting` is what raises it."""

    path: re.Pattern[str]
    max_bytes: int
    setting: str = "MEMVM_MAX_REQUEST_BYTES"
    advice: str = "send less per request"

    def detail(self) -> str:
        return f"The request body is larger than {self.max_bytes} bytes ({self.setting}); {self.advice}."


class BodySizeLimit:
    """ASGI middleware: refuses a declared Content-Length over the cap at once, and stops reading a
    chunked body as soon as it passes the cap. Routes that take large uploads (agent files, folder
    files) have caps of their own."""

    def __init__(self, app: ASGIApp, max_bytes: int, exceptions: Sequence[BodyCap] = ()) -> None:
        self.app = app
        self.default = BodyCap(re.compile(".*"), max_bytes)
        self.exceptions = exceptions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = next((cap for cap in self.exceptions if cap.path.fullmatch(scope["path"])), self.default)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap.max_bytes:
            await _too_large(send, cap)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > cap.max_bytes:
                raise HTTPException(413, detail=cap.detail())
            return message

        await self.app(scope, limited, send)


async def _too_large(send: Send, cap: BodyCap) -> None:
    headers = [(b"content-type", b"application/json"), (b"x-should-retry", b"false")]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": cap.detail()}).encode()})
