"""What is sent and what it is checked against: the query texts, the HTTP requests made of them, the
exact (index-free) searches for recall, and the full-text shapes timed beside the server's."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import asyncpg
import numpy as np

from .common import MODEL, log, stats_ms

QUERIES = [
    "what did I tell you about my sister's wedding",
    "when is the project deadline for the client report",
    "which hotel did we book for the flight to lisbon",
    "the pasta recipe with garlic and tomato",
    "my doctor appointment about the knee injury",
    "how often should I water the tomatoes in the garden",
    "the vet said something about the puppy's vaccination",
    "how much is the mortgage and the insurance each month",
    "the password for the backup server",
    "tickets for the jazz concert with the band",
    "training plan for the marathon and cycling",
    "the landlord promised to repair the heating",
    "birthday gift ideas for my grandmother",
    "budget review meeting with the manager",
    "what should I pack in my luggage for camping",
    "chocolate cake for dessert at the dinner party",
    "I have trouble sleeping and get headaches",
    "building a fence and a compost bin for the roses",
    "the cat needs new food and a collar",
    "tax refund and the bank transfer",
    "the laptop battery and charger problem",
    "guitar chords for the new song",
    "football match on saturday at the stadium",
    "moving boxes and furniture for the new apartment",
    "anniversary plans with my brother and cousin",
    "presentation for the quarterly roadmap launch",
    "visa and passport for the trip to tokyo",
    "vegetarian curry with spices and lemon",
    "yoga and stretching exercises for my back",
    "pruning the orchard and planting tulips",
    "adopting a dog from the shelter",
    "stocks, pension and investment savings",
    "deploying the python software update to kubernetes",
    "choir rehearsal and orchestra festival",
    "climbing gym and skiing season",
    "painting the walls and cleaning the carpet",
]

Request = tuple[str, str, dict[str, Any]]

_FTS_MATCH = "FROM message WHERE agent_id = $1 AND kind = 'message' AND fts @@ to_tsquery('english', $2)"
_FTS_RANKED = "ORDER BY ts_rank_cd(fts, to_tsquery('english', $2)) DESC, seq DESC LIMIT 50"
_FTS_VARIANTS = {
    "match only (count, bitmap scan)": ("SELECT count(*) " + _FTS_MATCH, "or"),
    "match + ORDER BY ts_rank LIMIT 50": (
        "SELECT id " + _FTS_MATCH + " ORDER BY ts_rank(fts, to_tsquery('english', $2)) DESC, seq DESC LIMIT 50",
        "or",
    ),
    "match + ORDER BY ts_rank_cd LIMIT 50": ("SELECT id " + _FTS_MATCH + " " + _FTS_RANKED, "or"),
    "all words (AND) + ts_rank_cd LIMIT 50": ("SELECT id " + _FTS_MATCH + " " + _FTS_RANKED, "and"),
    "rank only the 1000 newest matches": (
        "SELECT id FROM (SELECT id, seq, fts " + _FTS_MATCH + " ORDER BY seq DESC LIMIT 1000) m " + _FTS_RANKED,
        "or",
    ),
}


def any_word_query(query: str) -> str | None:
    """A tsquery text matching ANY of the query's words (for the full-text variants measured beside the server's SQL)."""
    words = re.findall(r"\w+", query.lower())
    return " | ".join(dict.fromkeys(words)) or None


def archival_request(agent_id: str, tag: str | None = None) -> Callable[[str], Request]:
    path = f"/v1/agents/{agent_id}/archival-memory/search"

    def req(q: str) -> Request:
        params: dict[str, Any] = {"query": q, "top_k": 10}
        if tag:
            params["tags"] = tag
        return "GET", path, {"params": params}

    return req


def message_request(agent_id: str, mode: str, limit: int) -> Callable[[str], Request]:
    def req(q: str) -> Request:
        return (
            "POST",
            "/v1/agents/messages/search",
            {"json": {"query": q, "agent_id": agent_id, "search_mode": mode, "limit": limit}},
        )

    return req


def overlap(found: Iterable[str], exact: list[str]) -> float:
    """recall@k of found against the exact top-k."""
    return len(set(found) & set(exact)) / max(1, len(exact))


def recall_fields(prefix: str, rec: list[float]) -> dict[str, Any]:
    return {f"{prefix}recall_at_10": round(float(np.mean(rec)), 4), f"{prefix}recall_per_query": [round(x, 2) for x in rec]}


async def _exact_ids(conn: asyncpg.Connection, sql: str, *args: Any) -> list[str]:
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_indexscan = off")
        await conn.execute("SET LOCAL enable_bitmapscan = off")
        return [r["id"] for r in await conn.fetch(sql, *args)]


async def exact_passages(conn: asyncpg.Connection, archive_id: str, q: np.ndarray, k: int, tag: str | None) -> list[str]:
    # ORDER BY the uncast column: the HNSW index is on (embedding::vector(384)), so it cannot serve this
    sql = (
        "SELECT id FROM passage WHERE archive_id = $1 AND embedding_dim = 384 AND embedding_model = $2"
        + (" AND tags && $4::text[]" if tag else "")
        + " ORDER BY embedding <=> $3 LIMIT "
        + str(int(k))
    )
    return await _exact_ids(conn, sql, archive_id, MODEL, q, *([[tag]] if tag else []))


async def exact_messages(conn: asyncpg.Connection, agent_id: str, q: np.ndarray, k: int) -> list[str]:
    sql = (
        "SELECT id FROM message WHERE agent_id = $1 AND kind = 'message' AND embedding_dim = 384 "
        "AND embedding_model = $2 ORDER BY embedding <=> $3 LIMIT " + str(int(k))
    )
    return await _exact_ids(conn, sql, agent_id, MODEL, q)


async def contrast(conn: asyncpg.Connection, archive_id: str, qvec: dict[str, np.ndarray]) -> dict[str, Any]:
    """Mean cosine similarity of each query's 1st, 10th, 100th and 1000th exact neighbour: how far the
    true top-10 stands out from the crowd (little contrast makes any ANN index miss neighbours)."""
    ks = (1, 10, 100, 1000)
    acc: dict[int, list[float]] = {k: [] for k in ks}
    for q in QUERIES:
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_indexscan = off")
            rows = await conn.fetch(
                "SELECT 1 - (embedding <=> $2) AS sim FROM passage WHERE archive_id = $1 ORDER BY embedding <=> $2 LIMIT 1000",
                archive_id,
                qvec[q],
            )
        for k in ks:
            if len(rows) >= k:
                acc[k].append(rows[k - 1]["sim"])
    return {f"sim@{k}": round(float(np.mean(v)), 3) for k, v in acc.items() if v}


async def fts_matching_rows(conn: asyncpg.Connection, agent_id: str) -> dict[str, Any]:
    """How many rows the any-word tsquery matches (ts_rank_cd is computed for every one of them)."""
    matches = [await conn.fetchval("SELECT count(*) " + _FTS_MATCH, agent_id, any_word_query(q)) for q in QUERIES[:12]]
    return {"queries": len(matches), "min": min(matches), "median": int(np.median(matches)), "max": max(matches)}


async def fts_variants(conn: asyncpg.Connection, agent_id: str) -> dict[str, Any]:
    """Where the full-text ranking's time goes, and what other shapes would cost (SQL only, each over
    every query text): finding the matches alone, ranking them with ts_rank or ts_rank_cd, an all-words
    (AND) query, and ranking only the 1000 most recent matches. (The server's own statement is sql_fts.)"""
    out = {}
    for name, (sql, kind) in _FTS_VARIANTS.items():
        lat, rows_n = [], []
        for q in QUERIES:
            tq = any_word_query(q)
            if kind == "and":
                tq = " & ".join(tq.split(" | "))
            t = time.perf_counter()
            rows = await conn.fetch(sql, agent_id, tq)
            lat.append(time.perf_counter() - t)
            rows_n.append(rows[0][0] if name.startswith("match only") else len(rows))
        out[name] = {**stats_ms(lat), "rows_median": int(np.median(rows_n))}
        log(
            f"  fts variant: {name:<48} p50 {out[name]['p50_ms']} ms p95 {out[name]['p95_ms']} ms "
            f"(rows median {out[name]['rows_median']})"
        )
    return out
