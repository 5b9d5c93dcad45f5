"""Archival search: an archive grown through each size, searched over HTTP at each, with recall against
exact search and the server's SQL profiled."""

from __future__ import annotations

import dataclasses
from typing import Any

import asyncpg
import numpy as np

from .common import RARE_TAG, loadavg, log, stats_ms
from .data import RowVectors
from .inprocess import inprocess_profile
from .queries import QUERIES, archival_request, contrast, exact_passages, overlap
from .server_sql import ServerSql, archival_sql, run_server_sql, sql_profile
from .session import Bench


async def archival_phases(b: Bench, vm: RowVectors, conn2: asyncpg.Connection) -> None:
    agent_id = await b.create_agent("search-bench-archival")
    _, r = await b.http("POST", "/v1/archives/", json={"name": "search-bench archive"})
    arc = r.json()
    archive_id = arc["id"]
    b.report["archive"] = {"id": archive_id, "embedding_config": arc.get("embedding_config"), "agent_id": agent_id}
    have, attached = 0, False
    for size in b.a.sizes:
        if b.left() < 60:
            b.report["notes"].append(f"skipped archival size {size}: time limit")
            break
        ph = await b.loader.load_passages(archive_id, have, size, vm)
        have = size
        if not attached:
            await b.http("PATCH", f"/v1/agents/{agent_id}/archives/attach/{archive_id}")
            attached = True
        else:  # refresh the agent's <memory_metadata> counts after the direct load
            await b.http("POST", f"/v1/agents/{agent_id}/recompile")
        ph.update(await _phase(b, agent_id, archive_id, size, conn2))
        b.report["phases"][f"archival_{size}"] = ph


async def _phase(b: Bench, agent_id: str, archive_id: str, size: int, conn2: asyncpg.Connection) -> dict[str, Any]:
    out: dict[str, Any] = {"size": size, "loadavg_before": loadavg()}
    runs = await _timed_runs(b, agent_id, size)
    out.update(await _recall(b, runs, archive_id, size, conn2))
    for k, v in runs.items():
        out[k] = v["stats"]
    log(
        f"  recall@10 {out['recall_at_10']} (min {out['recall_at_10_min']}); tagged recall {out['tagged_recall_at_10']}, "
        f"top_k filled {out['tagged_filled']['full']}/{out['tagged_filled']['queries']}"
    )
    out.update(await _sql_breakdown(b, archive_id, conn2))
    if b.a.profile:
        out["in_process"] = await inprocess_profile(b, "archival", agent_id, b.a.profile_runs)
    out["loadavg_after"] = loadavg()
    return out


async def _timed_runs(b: Bench, agent_id: str, size: int) -> dict[str, Any]:
    a = b.a
    plain, tagged = archival_request(agent_id), archival_request(agent_id, RARE_TAG)
    await b.warm(plain)
    runs = {}
    for conc in a.concurrency:
        runs[f"plain_c{conc}"] = await b.timed_queries(
            f"archival search @{size}", plain, a.queries * (1 if conc == 1 else 2), conc
        )
    await b.warm(tagged, 3)
    runs["tagged_c1"] = await b.timed_queries(f"archival search +tag(2%) @{size}", tagged, a.queries, 1)
    await b.warm(plain, len(QUERIES))  # every text seen once: the timed requests below are cache hits
    runs["repeated_c1"] = await b.timed_queries(f"archival search, repeated text @{size}", plain, a.queries, 1, fresh=False)
    return runs


async def _recall(b: Bench, runs: dict[str, Any], archive_id: str, size: int, conn2: asyncpg.Connection) -> dict[str, Any]:
    """recall@10 of the plain and the tagged search against the exact top-10 of the same vector."""
    plain, tagged = runs["plain_c1"], runs["tagged_c1"]
    recalls, t_recalls, filled = [], [], []
    for q in QUERIES:
        if q not in plain["bodies"] or q not in tagged["bodies"]:
            continue
        api = [h["id"] for h in plain["bodies"][q].get("results", [])]
        exact = await exact_passages(conn2, archive_id, b.vector_of(plain["texts"][q]), 10, None)
        if exact:
            recalls.append(overlap(api, exact))
        tb = tagged["bodies"].get(q, {}).get("results", [])
        texact = await exact_passages(conn2, archive_id, b.vector_of(tagged["texts"][q]), 10, RARE_TAG)
        filled.append(len(tb))
        if texact:
            t_recalls.append(overlap({h["id"] for h in tb}, texact))
        if not all(RARE_TAG in h.get("tags", []) for h in tb):
            b.report["notes"].append(f"tag filter leak at {size}: a result without {RARE_TAG}")
    return {
        "recall_per_query": [round(x, 2) for x in recalls],
        "similarity_contrast": await contrast(conn2, archive_id, b.qvec),
        "recall_at_10": round(float(np.mean(recalls)), 4) if recalls else None,
        "recall_at_10_min": round(float(np.min(recalls)), 2) if recalls else None,
        "queries_recall_below_0_5": int(sum(x < 0.5 for x in recalls)),
        "tagged_recall_at_10": round(float(np.mean(t_recalls)), 4) if t_recalls else None,
        "tagged_filled": {"queries": len(filled), "min": min(filled) if filled else None, "full": sum(f == 10 for f in filled)},
    }


async def _sql_breakdown(b: Bench, archive_id: str, conn2: asyncpg.Connection) -> dict[str, Any]:
    """The server's SQL run directly, EXPLAIN ANALYZE, and an ef_search sweep (recall vs SQL time)."""
    a = b.a
    plain_sql = await archival_sql(conn2, archive_id, 10, [])
    tag_sql = await archival_sql(conn2, archive_id, 10, [RARE_TAG])
    out = {
        "sql_plain": await sql_profile(conn2, plain_sql, a.sql_runs, vec_for=b.qvec.__getitem__),
        "sql_tagged": await sql_profile(conn2, tag_sql, max(10, a.sql_runs // 2), vec_for=b.qvec.__getitem__),
    }
    log(
        f"  server SQL alone: plain p50 {out['sql_plain']['client_timed']['p50_ms']} ms "
        f"p95 {out['sql_plain']['client_timed']['p95_ms']}; tagged p50 {out['sql_tagged']['client_timed']['p50_ms']} ms"
    )
    out["ef_sweep_sql_only"] = [await _ef_point(b, archive_id, plain_sql, ef, conn2) for ef in a.ef_sweep]
    return out


async def _ef_point(b: Bench, archive_id: str, plain_sql: ServerSql, ef: int, conn2: asyncpg.Connection) -> dict[str, Any]:
    sets = [
        ("SET LOCAL hnsw.iterative_scan = relaxed_order", []),
        (f"SET LOCAL hnsw.ef_search = {ef}", []),
        ("SET LOCAL enable_seqscan = off", []),
    ]
    if "enable_sort" in plain_sql.sql:  # the HNSW walk, which the server plans with sorts off (it turns them on)
        sets.append(("SET LOCAL enable_sort = off", []))
    s = dataclasses.replace(plain_sql, sets=sets)
    lat, rec = [], []
    for q in QUERIES:
        dt, rows = await run_server_sql(conn2, s, s.args(b.qvec[q]))
        lat.append(dt)
        exact = await exact_passages(conn2, archive_id, b.qvec[q], 10, None)
        rec.append(overlap([r["id"] for r in rows], exact))
    point = {"ef_search": ef, "recall_at_10": round(float(np.mean(rec)), 4), **stats_ms(lat)}
    log(f"  ef_search={ef:<4} recall@10 {point['recall_at_10']}  SQL p50 {point['p50_ms']} ms p95 {point['p95_ms']}")
    return point
