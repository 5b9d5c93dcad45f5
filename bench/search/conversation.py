"""Hybrid conversation search: one agent's history loaded to --messages rows, searched over HTTP in each
mode, with vector recall against exact search and the server's ranking SQL profiled."""

from __future__ import annotations

from typing import Any

import asyncpg

from .common import loadavg, log
from .data import RowVectors
from .inprocess import inprocess_profile
from .queries import QUERIES, exact_messages, fts_matching_rows, fts_variants, message_request, overlap, recall_fields
from .server_sql import conversation_sql, run_server_sql, sql_profile
from .session import Bench


async def conversation_phase(b: Bench, vm: RowVectors, conn2: asyncpg.Connection) -> None:
    a = b.a
    agent_id = await b.create_agent("search-bench-history")
    ph: dict[str, Any] = {"agent_id": agent_id, **await b.loader.load_messages(agent_id, a.messages, vm)}
    ph["unembedded_rows"] = await b.pg.fetchval(
        "SELECT count(*) FROM message WHERE agent_id = $1 AND embedding IS NULL", agent_id
    )
    ph["loadavg_before"] = loadavg()
    await _hybrid_http(b, ph, agent_id)
    await _mode_http(b, ph, agent_id, conn2)
    await _sql_breakdown(b, ph, agent_id, conn2)
    if a.profile:
        ph["in_process"] = await inprocess_profile(b, "conversation", agent_id, a.profile_runs)
    ph["fts_matching_rows"] = await fts_matching_rows(conn2, agent_id)
    ph["fts_variants_sql_only"] = await fts_variants(conn2, agent_id)
    log(
        f"  server SQL alone: fts p50 {ph['sql_fts']['client_timed']['p50_ms']} ms, "
        f"vector p50 {ph['sql_vector']['client_timed']['p50_ms']} ms; fts matches per query {ph['fts_matching_rows']}"
    )
    ph["loadavg_after"] = loadavg()
    b.report["phases"][f"messages_{a.messages}"] = ph


async def _hybrid_http(b: Bench, ph: dict[str, Any], agent_id: str) -> None:
    a = b.a
    hybrid = message_request(agent_id, "hybrid", a.limit)
    await b.warm(hybrid)
    for conc in a.concurrency:
        res = await b.timed_queries(f"hybrid message search @{a.messages}", hybrid, a.queries * (1 if conc == 1 else 2), conc)
        ph[f"hybrid_c{conc}"] = res["stats"]
        if conc == 1:
            hits = [len(body) for body in res["bodies"].values()]
            ph["hybrid_results_per_query"] = {"min": min(hits), "max": max(hits)} if hits else None
    await b.warm(hybrid, len(QUERIES))  # every text seen once: the timed requests are cache hits
    res = await b.timed_queries(f"hybrid search, repeated text @{a.messages}", hybrid, a.queries, 1, fresh=False)
    ph["hybrid_repeated_c1"] = res["stats"]


async def _mode_http(b: Bench, ph: dict[str, Any], agent_id: str, conn2: asyncpg.Connection) -> None:
    """fts-only and vector-only searches over HTTP; vector-mode recall@10 against exact search."""
    await _mode_timed(b, ph, agent_id, "fts")
    res = await _mode_timed(b, ph, agent_id, "vector")
    ph["vector_bodies_seen"] = len(res["bodies"])
    rec = []
    for q in QUERIES:
        if q not in res["bodies"]:
            continue
        api = [h["message"]["id"] for h in res["bodies"][q]][:10]
        exact = await exact_messages(conn2, agent_id, b.vector_of(res["texts"][q]), 10)
        rec.append(overlap(api, exact))
    ph.update(recall_fields("vector_", rec))
    log(f"  vector-mode recall@10 vs exact: {ph['vector_recall_at_10']}")


async def _mode_timed(b: Bench, ph: dict[str, Any], agent_id: str, mode: str) -> dict[str, Any]:
    a = b.a
    req = message_request(agent_id, mode, a.limit)
    await b.warm(req, 3)
    res = await b.timed_queries(f"{mode} message search @{a.messages}", req, max(len(QUERIES), a.queries // 2), 1)
    ph[f"{mode}_c1"] = res["stats"]
    return res


async def _sql_breakdown(b: Bench, ph: dict[str, Any], agent_id: str, conn2: asyncpg.Connection) -> None:
    """The server's ranking statements run directly (full text per query, hybrid, vector) and the vector
    statement's own recall@10."""
    a = b.a
    fts_by_query = {q: await conversation_sql(conn2, agent_id, q, a.limit, "fts") for q in QUERIES}
    hybrid_by_query = {q: await conversation_sql(conn2, agent_id, q, a.limit, "hybrid") for q in QUERIES}
    vec_sql = await conversation_sql(conn2, agent_id, QUERIES[0], a.limit, "vector")
    ph["sql_fts"] = await sql_profile(conn2, fts_by_query[QUERIES[0]], a.sql_runs, sql_for=fts_by_query.__getitem__)
    ph["sql_hybrid"] = await sql_profile(
        conn2, hybrid_by_query[QUERIES[0]], a.sql_runs, vec_for=b.vector_of, sql_for=hybrid_by_query.__getitem__
    )
    ph["sql_vector"] = await sql_profile(conn2, vec_sql, a.sql_runs, vec_for=b.qvec.__getitem__)
    rec = []
    for q in QUERIES:
        _, rows = await run_server_sql(conn2, vec_sql, vec_sql.args(b.qvec[q]))
        exact = await exact_messages(conn2, agent_id, b.qvec[q], 10)
        rec.append(overlap([r["id"] for r in rows[:10]], exact))
    ph.update(recall_fields("sql_vector_", rec))
    log(f"  vector ranking SQL alone: recall@10 {ph['sql_vector_recall_at_10']}")
