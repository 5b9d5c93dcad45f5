"""State shared by the phases: arguments, HTTP client, database connections, query vectors, the report;
and the timed loop every HTTP op goes through."""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import numpy as np
from pgvector.asyncpg import register_vector

from .common import log, proc_cpu_s, stats_ms
from .data import Loader, TextMaker
from .queries import QUERIES, Request
from .report import new_report

MakeRequest = Callable[[str], Request]


def pg_socket_of(data_dir: Path) -> tuple[str, int]:
    """(socket dir, port) of the embedded postmaster under <data_dir>/pg, from postmaster.pid."""
    lines = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()
    port = int(lines[3].strip())
    sock = lines[4].strip() if len(lines) > 4 and lines[4].strip() else str(data_dir / "pg")
    return sock, port


class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.rng = np.random.default_rng(a.seed)
        self.texts = TextMaker(np.random.default_rng(a.seed + 1))
        self.report = new_report(a)
        self.deadline = time.perf_counter() + a.time_limit
        self.qvec: dict[str, np.ndarray] = {}
        self.request_no = 0  # makes every fresh query text unique over the whole run
        self.client: httpx.AsyncClient | None = None
        self.pg: asyncpg.Connection | None = None
        self.loader: Loader | None = None
        self.embedder = None
        self.pg_pid: int | None = None
        self.db_url: str | None = None

    async def open(self) -> asyncpg.Connection:
        """Opens the HTTP client and the loading connection; returns a second connection for the exact
        searches and the server's SQL."""
        self.client = httpx.AsyncClient(
            base_url=self.a.base_url,
            timeout=httpx.Timeout(60.0),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=32),
        )
        self.pg = await self.connect_pg()
        self.loader = Loader(self.pg, self.a, self.rng, self.texts, self.left)
        return await self.connect_pg()

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    async def http(self, method: str, path: str, *, expect_ok: bool = True, **kw) -> tuple[float, httpx.Response]:
        assert self.client is not None
        t = time.perf_counter()
        r = await self.client.request(method, path, **kw)
        dt = time.perf_counter() - t
        if r.status_code >= 400:
            self._http_error(method, r)
            if expect_ok:
                raise RuntimeError(f"{method} {path} -> {r.status_code}: {r.text[:500]}")
        return dt, r

    def _http_error(self, method: str, r: httpx.Response) -> None:
        req = r.request
        err = {
            "method": method,
            "url": str(req.url),
            "request_body": (req.content or b"").decode("utf-8", "replace")[:2000],
            "status": r.status_code,
            "response_body": r.text[:2000],
        }
        if len([e for e in self.report["http_errors"] if e["url"].split("?")[0] == err["url"].split("?")[0]]) < 3:
            self.report["http_errors"].append(err)
        log(f"HTTP {r.status_code} on {method} {req.url}: {r.text[:300]}")

    async def connect_pg(self) -> asyncpg.Connection:
        # The server's own per-connection settings (jit, custom plans; the search settings are captured per statement), so the
        # SQL timed here runs as it does in the server.
        from memvm.db.engine import SESSION_SETTINGS

        a = self.a
        if a.pg_dsn:
            conn = await asyncpg.connect(a.pg_dsn, server_settings=SESSION_SETTINGS)
            self.db_url = "postgresql+asyncpg://" + a.pg_dsn.split("://", 1)[1]
        else:
            sock, port = pg_socket_of(Path(a.data_dir))
            conn = await asyncpg.connect(
                host=sock, port=port, user=a.pg_user, database=a.pg_database, server_settings=SESSION_SETTINGS
            )
            self.pg_pid = int((Path(a.data_dir) / "pg" / "postmaster.pid").read_text().split()[0])
            self.db_url = f"postgresql+asyncpg://{a.pg_user}@/{a.pg_database}?host={sock}&port={port}"
        await register_vector(conn)
        return conn

    async def create_agent(self, prefix: str) -> str:
        body = {
            "name": f"{prefix}-{uuid.uuid4().hex[:6]}",
            "memory_blocks": [
                {"label": "persona", "value": "A search benchmark agent.", "limit": 5000},
                {"label": "human", "value": "The human is a benchmark.", "limit": 5000},
            ],
            # never called: search does not use the chat model
            "llm_config": {
                "model": "unused",
                "model_endpoint_type": "openai",
                "model_endpoint": "http://127.0.0.1:9/v1",
                "context_window": 32000,
            },
        }
        _, r = await self.http("POST", "/v1/agents/", json=body)
        return r.json()["id"]

    async def timed_queries(self, name: str, make_req: MakeRequest, n: int, conc: int, *, fresh: bool = True) -> dict[str, Any]:
        """n requests (cycling QUERIES) with conc workers; returns latency stats, the last body per query and
        the text it was sent as. `fresh`: every request's text is new (the query plus " (#<i>)"), so the
        server's query-vector cache never hits and the query's embedding is part of every request;
        otherwise the 36 texts repeat (after the first pass, each search is a cache hit)."""
        lat: list[float] = []
        bodies: dict[str, Any] = {}
        texts: dict[str, str] = {}
        errors: dict[int, int] = {}
        counter = {"i": 0}
        cpu0, db0 = proc_cpu_s(self.a.server_pid), proc_cpu_s(self.pg_pid)
        t0 = time.perf_counter()

        async def worker() -> None:
            while counter["i"] < n and self.left() > 0:
                i = counter["i"]
                counter["i"] += 1
                q = QUERIES[i % len(QUERIES)]
                text = f"{q} (#{self.request_no})" if fresh else q
                self.request_no += 1
                method, path, kw = make_req(text)
                dt, r = await self.http(method, path, expect_ok=False, **kw)
                if r.status_code < 300:
                    lat.append(dt)
                    bodies[q], texts[q] = r.json(), text
                else:
                    errors[r.status_code] = errors.get(r.status_code, 0) + 1

        await asyncio.gather(*(worker() for _ in range(conc)))
        s = self._op_stats(name, conc, lat, time.perf_counter() - t0, errors, cpu0, db0)
        return {"stats": s, "bodies": bodies, "texts": texts}

    def _op_stats(
        self, name: str, conc: int, lat: list[float], wall: float, errors: dict[int, int], cpu0: float | None, db0: float | None
    ) -> dict[str, Any]:
        cpu1, db1 = proc_cpu_s(self.a.server_pid), proc_cpu_s(self.pg_pid)
        s = {
            "op": name,
            "concurrency": conc,
            **stats_ms(lat),
            "ops_s": round(len(lat) / wall, 1) if wall else None,
            "errors": errors,
        }
        if cpu0 is not None and cpu1 is not None and lat:
            s["server_cpu_ms_per_op"] = round((cpu1 - cpu0) * 1000 / len(lat), 2)
        if db0 is not None and db1 is not None and lat:
            s["db_cpu_ms_per_op"] = round((db1 - db0) * 1000 / len(lat), 2)
        log(
            f"  {name:<34} c={conc:<2} n={s.get('n')} p50={s.get('p50_ms')} p95={s.get('p95_ms')} ms  {s['ops_s']}/s  "
            f"CPU memvm {s.get('server_cpu_ms_per_op')} + pg {s.get('db_cpu_ms_per_op')} ms/op  errors={errors or ''}"
        )
        return s

    def fresh_text(self, i: int) -> str:
        """A query text the server has not seen (its query-vector cache misses)."""
        self.request_no += 1
        return f"{QUERIES[i % len(QUERIES)]} (#{self.request_no})"

    def vector_of(self, text: str) -> np.ndarray:
        """The vector the server computes for a query text (same model, one text per call)."""
        if text not in self.qvec:
            self.qvec[text] = self.embedder.embed_sync([text])[0]
        return self.qvec[text]

    async def warm(self, make_req: MakeRequest, k: int = 5) -> None:
        for i in range(k):
            method, path, kw = make_req(QUERIES[i % len(QUERIES)])
            await self.http(method, path, expect_ok=False, **kw)

    async def http_floor(self, n: int = 100) -> dict[str, Any]:
        lat = []
        for _ in range(n):
            dt, _ = await self.http("GET", "/v1/health/")
            lat.append(dt)
        return stats_ms(lat)
