"""A loopback relay in front of memvm's `POST /v1/embeddings` that closes every connection after its
answer. Letta 0.16.8 makes a new openai client for each embedding call and never closes it; against
a keep-alive server the dropped client's socket is closed while asyncio still watches its file
descriptor, the number is reused by Letta's next PostgreSQL connection, and that connect hangs until
asyncpg's 60 s timeout (a 500). The shared fake LLM closes its connections for the same reason. The
relay only forwards: Letta gets memvm's vectors byte for byte."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

_FORWARDED = ("content-type", "authorization")


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    method, target, _ = head[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in head[1:] if ":" in line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, target, headers, body


def _response(status: int, reason: str, content_type: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


@asynccontextmanager
async def closing_relay(upstream: httpx.AsyncClient) -> AsyncIterator[str]:
    """Serves on an ephemeral loopback port while open; yields its base URL (…/v1 goes to memvm's /v1)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, target, headers, body = await _read_request(reader)
            sent = {k: v for k, v in headers.items() if k in _FORWARDED}
            answer = await upstream.request(method, target, content=body, headers=sent)
            content_type = answer.headers.get("content-type", "application/json")
            writer.write(_response(answer.status_code, answer.reason_phrase, content_type, answer.content))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away: nothing to answer
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()
