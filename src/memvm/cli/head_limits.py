"""A cap on the size of a request's head (its request line and headers), enforced while it is read.

uvicorn's httptools protocol has no such cap, and httptools appends each piece of a header that
arrives to what it has of it so far: a 128 MB header took the process tens of seconds of copying,
during which it answered nothing else, before the app could even check the API key. Here the parser
is fed at most one cap's worth of a head; past MEMVM_MAX_HEADER_BYTES in all, or one header past
MEMVM_MAX_HEADER_LINE_BYTES, the answer is a 431 and the connection closes, so the cost of a huge
head is reading and dropping its bytes.

A pipelined request (one sent on the same connection before the previous answer came) is counted
from the end of the piece of data in which the previous request ended: its head may pass the total
by up to one cap before it is refused, never more.
"""

import asyncio
import json
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from memvm.config import Settings

# After a refusal the client may still be sending its head: the rest is read and dropped for this
# long, so that it gets to read the answer (closing with unread data would reset the connection).
LINGER_SECONDS = 5.0


@dataclass(frozen=True)
class HeadLimits:
    total_bytes: int  # the request line and every header
    header_bytes: int  # one header: its name and value


def capped_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """uvicorn's `http` protocol for `memvm serve`, with the settings' caps. A partial of a
    module-level class, so that it pickles into the processes of `--workers`."""
    limits = HeadLimits(total_bytes=settings.max_header_bytes, header_bytes=settings.max_header_line_bytes)
    # uvicorn calls it as a class (keyword arguments only); its type says `type` alone.
    return cast(type[asyncio.Protocol], partial(CappedHttpToolsProtocol, limits=limits))


class CappedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, feeding its parser a head one cap at a time."""

    def __init__(self, *args: Any, limits: HeadLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.head_bytes = 0  # of the head being read
        self.reading_head = True
        self.refusal: str | None = None  # why the head is refused, once it is

    def data_received(self, data: bytes) -> None:
        if self.refusal is not None:
            return  # answered already: the rest is dropped until the connection closes
        while data and self.reading_head:
            room = self.limits.total_bytes + 1 - self.head_bytes  # one byte more than the cap tells it is passed
            piece, data = data[:room], data[room:]
            self.head_bytes += len(piece)
            super().data_received(piece)
            if self.refusal is None and self.reading_head and self.head_bytes > self.limits.total_bytes:
                self.refusal = (
                    f"The request line and headers are larger than {self.limits.total_bytes} bytes in all "
                    "(MEMVM_MAX_HEADER_BYTES); send fewer or smaller headers."
                )
            if self.refusal is not None:
                self._refuse(self.refusal)
                return
            if self.transport.is_closing():
                return  # uvicorn answered a malformed request with a 400
        if data:
            super().data_received(data)

    def on_header(self, name: bytes, value: bytes) -> None:
        # Only in the head: a chunked body's trailers come after the app has started.
        if self.reading_head and self.refusal is None and len(name) + len(value) > self.limits.header_bytes:
            self.refusal = (
                f"The header {name[:64].decode('latin-1')!r} is larger than {self.limits.header_bytes} bytes "
                "(MEMVM_MAX_HEADER_LINE_BYTES, its name and value together); send it smaller."
            )
        super().on_header(name, value)

    # Once the head is refused, the parser may still reach its end within the same piece: the app
    # must not start on it.
    def on_headers_complete(self) -> None:
        self.reading_head = False
        if self.refusal is None:
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self.refusal is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self.reading_head, self.head_bytes = True, 0
        if self.refusal is None:
            super().on_message_complete()

    def _refuse(self, detail: str) -> None:
        self.logger.warning("Refused a request head: %s", detail)
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # an answer to an earlier request is still being written: no room for ours
            return
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-should-retry", b"false"),
            (b"connection", b"close"),
            *self.server_state.default_headers,
        ]
        head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
        self.transport.write(STATUS_LINE[431] + head + b"\r\n" + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()
