"""Where the time of one search goes, measured in this process on memvm's own code and the same
database: (1) the runtime function the endpoint calls, with every stage timed by wrapping the module
attributes it looks up (nothing in src/ is changed); (2) the whole endpoint through FastAPI in-process
(httpx.ASGITransport: no socket, no uvicorn); (3) cProfile of (2)."""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from .common import log, stats_ms
from .queries import QUERIES, archival_request, message_request
from .session import Bench, MakeRequest


class _StageTimer:
    def __init__(self) -> None:
        self.timings: dict[str, list[float]] = {}
        self._patched: list[tuple[Any, str, Any]] = []

    def wrap(self, obj: Any, attr: str, label: str) -> None:
        orig = getattr(obj, attr)

        async def timed(*args, **kw):
            t = time.perf_counter()
            try:
                return await orig(*args, **kw)
            finally:
                self.timings.setdefault(label, []).append(time.perf_counter() - t)

        setattr(obj, attr, timed)
        self._patched.append((obj, attr, orig))

    def restore(self, embedder: Any) -> None:
        for obj, attr, orig in reversed(self._patched):
            if obj is embedder:
                del obj.embed  # back to the class's method
            else:
                setattr(obj, attr, orig)


def _runtime_call(timer: _StageTimer, deps: Any, kind: str, agent_id: str, limit: int) -> Callable[[str], Awaitable[Any]]:
    """The runtime function behind the endpoint, with its kind's stages wrapped."""
    from memvm.actors import LOCAL_CALLER  # the bench's data is the default organization's
    from memvm.archives import repository as arch_repo
    from memvm.archives.schemas import SearchFilters
    from memvm.runtime.operations import message_search as rt_recall
    from memvm.runtime.operations import passages as rt_arch
    from memvm.search import conversation as conv

    if kind == "archival":
        timer.wrap(arch_repo, "search_scope", "transaction 1: search_scope (agent + archives, one SELECT)")
        timer.wrap(rt_arch, "search_passages", "search_passages (vector SQL + result rows)")

        async def search_archive(q: str) -> Any:
            return await rt_arch.search_for_agent(deps, LOCAL_CALLER, agent_id, SearchFilters(query=q, top_k=10))

        return search_archive
    timer.wrap(conv, "_prepare", "lexemes + vector settings (SELECT to_tsvector, set_config)")
    timer.wrap(rt_recall, "search_messages", "transaction 2: search_messages (lexemes, rankings statement, fetch rows)")

    async def search_history(q: str) -> Any:
        return await rt_recall.search_history(
            deps,
            LOCAL_CALLER,
            query=q,
            agent_id=agent_id,
            conversation_id=None,
            mode="hybrid",
            roles=[],
            start_date=None,
            end_date=None,
            limit=limit,
        )

    return search_history


async def _time_stages(
    b: Bench, call: Callable[[str], Awaitable[Any]], timings: dict[str, list[float]], n: int
) -> dict[str, Any]:
    for i in range(3):
        await call(QUERIES[i])
    timings.clear()
    total = []
    for i in range(n):
        t = time.perf_counter()
        await call(b.fresh_text(i))
        total.append(time.perf_counter() - t)
    return {
        "runtime_call_total": stats_ms(total),
        "stages": {k: stats_ms(v) for k, v in timings.items()},
        "stage_calls_per_search": {k: round(len(v) / n, 2) for k, v in timings.items()},
    }


async def _time_asgi(b: Bench, app: Any, req: MakeRequest, n: int) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench.local") as c:
        for i in range(3):
            method, path, kw = req(QUERIES[i])
            await c.request(method, path, **kw)
        lat = []
        for i in range(n):
            method, path, kw = req(b.fresh_text(i))
            t = time.perf_counter()
            r = await c.request(method, path, **kw)
            lat.append(time.perf_counter() - t)
            r.raise_for_status()
        return {"asgi_in_process": stats_ms(lat), **await _cprofile(b, c, req, n)}


async def _cprofile(b: Bench, c: httpx.AsyncClient, req: MakeRequest, n: int) -> dict[str, str]:
    prof = cProfile.Profile()
    prof.enable()
    for i in range(n):
        method, path, kw = req(b.fresh_text(i))
        await c.request(method, path, **kw)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
    out = {"cprofile_cumulative_top40": buf.getvalue()[-12000:]}
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
    out["cprofile_tottime_top25"] = buf.getvalue()[-8000:]
    return out


async def inprocess_profile(b: Bench, kind: str, agent_id: str, n: int) -> dict[str, Any]:
    from memvm.agents import service as agents_service
    from memvm.config import Settings
    from memvm.db.database import DatabaseTarget
    from memvm.main import create_app

    settings = Settings(database_url=b.db_url, migrate_on_start=False, embedding_worker=False)
    app = create_app(settings, database=DatabaseTarget(settings.database_url, "bench (in-process)"))
    out: dict[str, Any] = {"runs": n}
    async with app.router.lifespan_context(app):
        deps = app.state.runtime
        embedder = deps.embedders.for_handle(None)
        await embedder.embed(["warm up"])
        timer = _StageTimer()
        timer.wrap(embedder, "embed", "embed (to_thread + ONNX)")
        timer.wrap(agents_service, "get_agent", "get_agent (SELECT agent)")
        call = _runtime_call(timer, deps, kind, agent_id, b.a.limit)
        try:
            out.update(await _time_stages(b, call, timer.timings, n))
        finally:
            timer.restore(embedder)
        req = archival_request(agent_id) if kind == "archival" else message_request(agent_id, "hybrid", b.a.limit)
        out.update(await _time_asgi(b, app, req, n))
    log(
        f"  in-process {kind}: runtime call p50 {out['runtime_call_total']['p50_ms']} ms; "
        f"ASGI p50 {out['asgi_in_process']['p50_ms']} ms; "
        + "; ".join(f"{k} p50 {v['p50_ms']}" for k, v in out["stages"].items())
    )
    return out
