"""GET /metrics (Prometheus text format; admin key, since it spans every organization) and the
middleware that counts HTTP requests by route template, not by raw path (ids would explode it)."""

import time
from typing import Any

from fastapi import APIRouter, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memvm import metrics
from memvm.api.auth import AdminDep
from memvm.api.errors import RESPONSES

router = APIRouter(tags=["metrics"], responses=RESPONSES)  # admin-only: no api_router guards


_EXPOSITION: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Prometheus text exposition format.",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


@router.get("/metrics", response_class=Response, responses=_EXPOSITION)
async def prometheus_metrics(admin: AdminDep) -> Response:
    """Requests, turns, steps, model calls and tokens, tool calls, block writes, searches, the
    embedding queue, the DB pool and turn-lock waits."""
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


class HttpMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status, started = 500, time.perf_counter()

        async def recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording)
        finally:
            route = getattr(scope.get("route"), "path", "(unmatched)")
            metrics.HTTP_REQUESTS.labels(scope["method"], route, str(status)).inc()
            metrics.HTTP_SECONDS.labels(scope["method"], route).observe(time.perf_counter() - started)
            metrics.after_request()
