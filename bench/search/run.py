"""The command line: arguments, the phases in order, the outputs."""

from __future__ import annotations

import argparse
import asyncio
import urllib.parse
from typing import Any

import asyncpg
import numpy as np

from .archival import archival_phases
from .common import loadavg, log
from .conversation import conversation_phase
from .data import RowVectors, anchor_maker, subspace_maker
from .embedding import embedding_throughput
from .queries import QUERIES
from .report import summary, write_outputs
from .session import Bench


def _server_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--base-url", default="http://127.0.0.1:9283")
    ap.add_argument(
        "--data-dir", help="memvm's MEMVM_DATA_DIR (its embedded PostgreSQL socket is found from <dir>/pg/postmaster.pid)"
    )
    ap.add_argument("--pg-dsn", help="or: a DSN of the server's database")
    ap.add_argument("--pg-user", default="postgres")
    ap.add_argument("--pg-database", default="postgres")
    ap.add_argument("--server-pid", type=int, help="memvm pid, for server CPU per request")


def _workload_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--sizes", default="10000,100000", help="archive sizes (the archive grows from one to the next)")
    ap.add_argument("--messages", type=int, default=100_000, help="messages of the conversation-search agent (0 skips)")
    ap.add_argument(
        "--queries",
        type=int,
        default=200,
        help="HTTP requests per measured op at concurrency 1 (at least 36: every query text once)",
    )
    ap.add_argument("--concurrency", default="1", help="comma list; targets are read at 1")
    ap.add_argument("--limit", type=int, default=10, help="limit of the message searches")
    ap.add_argument("--sql-runs", type=int, default=100, help="direct runs of the server's SQL for the breakdown")
    ap.add_argument("--ef-sweep", default="40,100,200,400", help="hnsw.ef_search values for the SQL-only recall/latency sweep")


def _data_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument(
        "--vectors",
        choices=["anchors", "subspace"],
        default="anchors",
        help="anchors: rows are noisy mixtures of two embedded texts (realistic similarity spread); "
        "subspace: centre + 16-d cluster subspace + isotropic noise (low contrast: a hard case for HNSW)",
    )
    ap.add_argument(
        "--index-mode",
        choices=["rebuild", "incremental"],
        default="rebuild",
        help="rebuild: drop the HNSW index before COPY and recreate it (same DDL) after; "
        "incremental: insert with the index in place",
    )
    ap.add_argument("--maintenance-work-mem", default="1GB", help="for the index build session only")
    ap.add_argument("--embed-single", type=int, default=200)
    ap.add_argument(
        "--embed-batch",
        type=int,
        default=2048,
        help="texts embedded in one batch (throughput); also the anchors of --vectors anchors",
    )
    ap.add_argument("--seed", type=int, default=42)


def _run_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--no-profile",
        dest="profile",
        action="store_false",
        help="skip the in-process stage timing / cProfile of the server's search code",
    )
    ap.add_argument("--profile-runs", type=int, default=60)
    ap.add_argument("--time-limit", type=float, default=1500.0, help="seconds; phases that would start later are skipped")
    ap.add_argument("--quick", action="store_true", help="2k/20k passages, 20k messages, 60 queries per op")
    ap.add_argument("--out-json")
    ap.add_argument("--out-md")


def parse_args(description: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    for add in (_server_args, _workload_args, _data_args, _run_args):
        add(ap)
    a = ap.parse_args()
    host = urllib.parse.urlparse(a.base_url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("--base-url must be loopback")
    if not (a.data_dir or a.pg_dsn):
        raise SystemExit("give --data-dir or --pg-dsn")
    if a.quick:
        a.sizes, a.messages, a.queries, a.sql_runs, a.embed_single, a.embed_batch = (
            "2000,20000",
            min(a.messages, 20_000),
            60,
            30,
            60,
            400,
        )
        a.profile_runs = 30
    a.queries = max(a.queries, len(QUERIES))
    a.sizes = [int(x) for x in str(a.sizes).split(",") if x.strip() and int(x) > 0]
    a.concurrency = [int(x) for x in str(a.concurrency).split(",") if x.strip()]
    a.ef_sweep = [int(x) for x in str(a.ef_sweep).split(",") if x.strip()]
    if 1 not in a.concurrency:
        a.concurrency = [1] + a.concurrency
    return a


async def _postgres_facts(b: Bench) -> None:
    names = [
        "shared_buffers",
        "work_mem",
        "maintenance_work_mem",
        "max_parallel_maintenance_workers",
        "effective_cache_size",
        "max_parallel_workers_per_gather",
        "jit",
        "plan_cache_mode",
    ]
    rows = await b.pg.fetch("SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1::text[])", names)
    settings = {r["name"]: r["setting"] + (r["unit"] or "") for r in rows}
    b.report["postgres"] = {
        "version": await b.pg.fetchval("SHOW server_version"),
        "pgvector": await b.pg.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
        "settings": settings,
    }
    log(f"postgres {b.report['postgres']['version']}, pgvector {b.report['postgres']['pgvector']}, {settings}")


def _vector_maker(b: Bench, anchors: np.ndarray, anchor_clusters: np.ndarray) -> RowVectors:
    if b.a.vectors == "anchors":
        vm, b.report["data"] = anchor_maker(b.a, anchors, anchor_clusters, b.qvec)
    else:
        vm, b.report["data"] = subspace_maker(b.a, b.texts, b.embedder, b.qvec)
    log(f"data: {b.report['data']}")
    return vm


async def _phases(b: Bench, conn2: asyncpg.Connection) -> None:
    await _postgres_facts(b)
    anchors, anchor_clusters = embedding_throughput(b)
    b.report["http_floor_health"] = await b.http_floor()
    log(f"HTTP floor (GET /v1/health/): p50 {b.report['http_floor_health']['p50_ms']} ms")
    vm = _vector_maker(b, anchors, anchor_clusters)
    if b.a.sizes:
        await archival_phases(b, vm, conn2)
    if b.a.messages and b.left() > 60:
        await conversation_phase(b, vm, conn2)


async def run_bench(a: argparse.Namespace) -> dict[str, Any]:
    b = Bench(a)
    conn2 = await b.open()
    try:
        await _phases(b, conn2)
    finally:
        b.report["machine"]["loadavg_end"] = loadavg()
        await b.client.aclose()
        await b.pg.close()
        await conn2.close()
    b.report["summary"] = summary(b.report, a.sizes, a.messages)
    return b.report


def main(description: str) -> int:
    a = parse_args(description)
    report = asyncio.run(run_bench(a))
    write_outputs(report, a.out_json, a.out_md)
    return 0
