"""ReturnMemoryWhenIdle: freed heap goes back once per quiet spell, never while a request is served."""

import asyncio

import httpx
from starlette.types import Receive, Scope, Send

from memvm.api.idle_memory import ReturnMemoryWhenIdle

QUIET = 0.2


class SlowApp:
    """Answers each request once `go` is set."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.go.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def client_and_releases() -> tuple[httpx.AsyncClient, SlowApp, list[float]]:
    releases: list[float] = []
    inner = SlowApp()
    app = ReturnMemoryWhenIdle(inner, quiet_seconds=QUIET, release=lambda: releases.append(asyncio.get_running_loop().time()))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memvm.test"), inner, releases


async def test_released_once_after_the_last_request_and_a_quiet_spell():
    client, inner, releases = client_and_releases()
    async with client:
        first = asyncio.create_task(client.get("/"))
        second = asyncio.create_task(client.get("/"))
        await asyncio.sleep(2 * QUIET)
        assert releases == []  # both in flight

        inner.go.set()
        await asyncio.gather(first, second)
        ended = asyncio.get_running_loop().time()
        await asyncio.sleep(3 * QUIET)

    assert len(releases) == 1 and releases[0] - ended >= QUIET * 0.9


async def test_a_request_within_the_quiet_spell_puts_the_release_off():
    client, inner, releases = client_and_releases()
    inner.go.set()
    async with client:
        await client.get("/")
        await asyncio.sleep(QUIET / 2)
        await client.get("/")
        last = asyncio.get_running_loop().time()
        await asyncio.sleep(QUIET / 2)
        assert releases == []

        await asyncio.sleep(2 * QUIET)

    assert len(releases) == 1 and releases[0] - last >= QUIET * 0.9
