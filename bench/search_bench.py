#!/usr/bin/env python3
"""Search targets of memvm, end to end over HTTP against a live `memvm serve` (embedded PostgreSQL).

Measures, at concurrency 1 (and optionally more):

* archival search (`GET /v1/agents/{id}/archival-memory/search?query=...&top_k=10`) p50/p95 and
  recall@10 against an exact (index-free) search for the same query vector, at each archive size
  (default 10k and 100k passages); also a tag-filtered query (tag on ~2 % of passages): recall and
  whether top_k is filled;
* hybrid conversation search (`POST /v1/agents/messages/search`, search_mode hybrid) p50/p95 over
  100k stored messages of one agent (plus fts-only and vector-only for the breakdown);
* the local embedding model's throughput in-process (single sentences and batches).

Passages and messages are written straight into the server's database (COPY) with CLUSTERED
synthetic 384-d unit vectors: the cluster centres are local-model embeddings of 200 synthetic topic
sentences, and each row is centre + a per-cluster 16-d subspace component + isotropic noise. Queries
are real text that the server embeds; recall is computed against the exact top-10 of the same
query vector (embedded here with memvm.embeddings.local.LocalMiniLM, same model, deterministic).

The time breakdown (embedding call, the server's own SQL run directly, HTTP floor) and EXPLAIN
ANALYZE of the server's SQL are recorded in the JSON; the SQL is compiled from memvm.search.* itself,
so it is the statement the server runs.

    bench/run.sh search            # starts memvm, runs this, stops everything
    python3 bench/search_bench.py --base-url http://127.0.0.1:9283 --data-dir <MEMVM_DATA_DIR> --out-json x.json

Needs: httpx, asyncpg, numpy, pgvector (all memvm dependencies) and memvm importable.
It writes to the server's database: use a throwaway data dir (run.sh does).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import platform
import random
import re
import sys
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import numpy as np
from pgvector.asyncpg import register_vector

MODEL = "local/all-MiniLM-L6-v2"
DIM = 384
RARE_TAG = "bench-rare"
COMMON_TAG = "notes"

TARGETS = {
    "archival_search_p95_ms": 10.0,
    "archival_recall_at_10": 0.95,
    "hybrid_search_p95_ms": 20.0,
}

# ---------------------------------------------------------------- vocabulary and texts
TOPICS: dict[str, list[str]] = {
    "family": "sister brother mother father daughter son wedding birthday anniversary cousin grandmother grandfather aunt uncle niece nephew baby party reunion gift".split(),
    "work": "project deadline meeting manager report budget client presentation team review promotion salary office contract proposal roadmap launch quarterly colleague interview".split(),
    "travel": "flight hotel passport airport beach museum train luggage itinerary vacation tokyo paris lisbon mountains hiking visa booking ferry island camping".split(),
    "cooking": "recipe pasta garlic tomato bread oven soup curry salad cheese chocolate cake dinner breakfast kitchen spices lemon chicken vegetarian dessert".split(),
    "health": "doctor appointment medication allergy exercise sleep headache dentist vitamins therapy running yoga diet injury knee blood pressure checkup prescription stretching".split(),
    "garden": "garden tomatoes roses fence compost seeds soil watering lawn shed tulips orchard pruning greenhouse weeds fertilizer hedge irrigation flowerbed mulch".split(),
    "pets": "dog cat puppy kitten vet leash walk food collar vaccination grooming parrot aquarium hamster training treats adoption shelter fleas litter".split(),
    "finance": "savings mortgage taxes invoice bank loan insurance pension stocks rent expenses credit account refund transfer subscription bills investment debt payroll".split(),
    "tech": "laptop phone password backup server database python update router printer keyboard monitor cloud email software bug deployment kubernetes battery charger".split(),
    "music": "guitar piano concert album song band lyrics drums violin playlist festival rehearsal choir tickets vinyl jazz orchestra singer melody chords".split(),
    "sports": "football tennis marathon swimming cycling match tournament coach training league goal score stadium race bicycle gym climbing skiing referee season".split(),
    "home": "apartment landlord repair plumber furniture sofa painting renovation moving boxes keys neighbor heating window curtains carpet cleaning laundry garage roof".split(),
}
FILLER = (
    "the a to and of in that is for it on with as was at be this have from or by not but what all were we when "
    "your can said there use an each which she do how their if will up other about out many then them these so "
    "some her would make like him into time has look two more write go see number no way could people my than "
    "first been call who its now find long down day did get come made may part remember told asked next week "
    "yesterday tomorrow later today plan planned need want think said talk talked mentioned decided".split()
)
TEMPLATES = [
    "I told you about the {a} and the {b} last week, and we planned the {c} for {d}.",
    "Remember that my {a} needs a {b} before the {c}; the {d} is also important.",
    "We talked about {a}, {b} and {c} while discussing the {d}.",
    "Notes on {a}: check the {b}, ask about the {c}, and book the {d}.",
    "The {a} went well, but the {b} and {c} still need work before the {d}.",
]
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


def any_word_query(query: str) -> str | None:
    """A tsquery text matching ANY of the query's words (for the full-text variants measured beside the server's SQL)."""
    words = re.findall(r"\w+", query.lower())
    return " | ".join(dict.fromkeys(words)) or None


def zipf_weights(n: int, s: float = 1.1) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


class TextMaker:
    """Word-bearing synthetic text drawn from a small vocabulary (12 topics x 20 words + common words)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.topics = list(TOPICS)
        self.all_topic_words = np.array(sorted({w for ws in TOPICS.values() for w in ws}), dtype=object)
        self.filler = np.array(FILLER, dtype=object)
        self.filler_p = zipf_weights(len(FILLER), 0.9)

    def topic_of(self, cluster: int) -> list[str]:
        return TOPICS[self.topics[cluster % len(self.topics)]]

    def centre_sentence(self, cluster: int) -> str:
        words = self.topic_of(cluster)
        r = random.Random(cluster)
        a, b, c, d = r.sample(words, 4)
        return TEMPLATES[cluster % len(TEMPLATES)].format(a=a, b=b, c=c, d=d)

    def text(self, cluster: int, n_words: int) -> str:
        """35 % words of the row's own topic, 10 % words of any topic, 55 % common words (Zipf; many are
        English stop words that to_tsvector drops)."""
        tw = self.topic_of(cluster)
        kinds = self.rng.random(n_words)
        n_topic = int((kinds < 0.35).sum())
        n_other = int(((kinds >= 0.35) & (kinds < 0.45)).sum())
        n_fill = n_words - n_topic - n_other
        out = list(self.rng.choice(tw, n_topic)) + list(self.rng.choice(self.all_topic_words, n_other))
        out += list(self.rng.choice(self.filler, n_fill, p=self.filler_p))
        self.rng.shuffle(out)
        return " ".join(out)


class VectorMaker:
    """Clustered unit vectors: centre + A * (per-cluster 16-d subspace) + B * isotropic noise."""

    def __init__(self, centres: np.ndarray, rng: np.random.Generator, sub_dim: int = 16, a: float = 0.6, b: float = 0.35):
        self.centres = centres.astype(np.float32)
        self.rng = rng
        k, d = centres.shape
        self.bases = (rng.standard_normal((k, sub_dim, d)) / np.sqrt(d)).astype(np.float32)
        self.sub_dim, self.a, self.b = sub_dim, a, b

    def make(self, clusters: np.ndarray) -> np.ndarray:
        n = len(clusters)
        z = (self.rng.standard_normal((n, self.sub_dim)) / np.sqrt(self.sub_dim)).astype(np.float32)
        sub = np.einsum("ns,nsd->nd", z, self.bases[clusters])
        iso = (self.rng.standard_normal((n, DIM)) / np.sqrt(DIM)).astype(np.float32)
        v = self.centres[clusters] + self.a * sub + self.b * iso
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


class AnchorVectorMaker:
    """Rows near REAL local-model embeddings: normalize(w * e_a + (1 - w) * e_b + 0.25 * isotropic noise),
    e_a and e_b two embedded texts (anchors) of the row's cluster, w ~ U(0.5, 1). Query-to-row
    similarities then spread like query-to-text similarities do (the contrast between the 10th and
    the 1000th neighbour is reported), unlike isotropic noise around centres, where every row of a
    cluster sits at nearly the same distance from an off-centre query."""

    def __init__(self, anchors: np.ndarray, anchor_clusters: np.ndarray, n_clusters: int, rng: np.random.Generator, noise: float = 0.25):
        self.anchors = anchors.astype(np.float32)
        self.rng = rng
        self.noise = noise
        every = np.arange(len(anchors))
        self.by_cluster = [np.flatnonzero(anchor_clusters == c) for c in range(n_clusters)]
        self.by_cluster = [ix if len(ix) else every for ix in self.by_cluster]

    def make(self, clusters: np.ndarray) -> np.ndarray:
        n = len(clusters)
        a = np.empty(n, dtype=np.int64)
        b = np.empty(n, dtype=np.int64)
        for c in np.unique(clusters):
            rows = np.flatnonzero(clusters == c)
            pool = self.by_cluster[int(c)]
            a[rows] = self.rng.choice(pool, len(rows))
            b[rows] = self.rng.choice(pool, len(rows))
        w = self.rng.uniform(0.5, 1.0, (n, 1)).astype(np.float32)
        iso = (self.rng.standard_normal((n, DIM)) / np.sqrt(DIM)).astype(np.float32)
        v = w * self.anchors[a] + (1 - w) * self.anchors[b] + self.noise * iso
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


# ---------------------------------------------------------------- small helpers
def pct(sorted_vals: list[float], p: float) -> float | None:
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def stats_ms(lat_s: list[float]) -> dict[str, Any]:
    v = sorted(x * 1000 for x in lat_s)
    if not v:
        return {"n": 0}
    return {"n": len(v), "p50_ms": round(pct(v, 50), 2), "p95_ms": round(pct(v, 95), 2), "p99_ms": round(pct(v, 99), 2),
            "mean_ms": round(sum(v) / len(v), 2), "min_ms": round(v[0], 2), "max_ms": round(v[-1], 2)}


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def proc_cpu_s(pid: int | None) -> float | None:
    """user+sys CPU seconds of pid and its descendants."""
    if not pid:
        return None
    total, todo, seen = 0.0, [pid], set()
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
        todo += children.get(p, [])
    return total


def machine_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "nproc": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
        "httpx": httpx.__version__, "asyncpg": asyncpg.__version__, "loadavg_start": loadavg(),
    }
    try:
        facts["mem_total_kb"] = int(open("/proc/meminfo").readline().split()[1])
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
    except Exception:
        pass
    return facts


def pg_socket_of(data_dir: Path) -> tuple[str, int]:
    """(socket dir, port) of the embedded postmaster under <data_dir>/pg, from postmaster.pid."""
    lines = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()
    port = int(lines[3].strip())
    sock = lines[4].strip() if len(lines) > 4 and lines[4].strip() else str(data_dir / "pg")
    return sock, port


class Log:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        print(f"[search {time.perf_counter() - self.t0:7.1f}s] {msg}", flush=True)


log = Log()


# ---------------------------------------------------------------- the server's SQL, compiled from memvm itself
class _Capture:
    """Stands in for an AsyncSession: records every statement memvm.search.* would execute, with the
    parameters passed alongside (e.g. text("... :ef"), {"ef": "40"})."""

    def __init__(self, lexemes: list[str] | None = None) -> None:
        self.statements: list[tuple[Any, dict[str, Any] | None]] = []
        self.lexemes = lexemes or []  # what the server's lexeme lookup would return

    async def execute(self, statement, params=None, *a, **k):
        self.statements.append((statement, params))

        class _R(list):
            def all(self):
                return []

        return _R()

    async def scalars(self, statement, params=None, *a, **k):
        if "to_tsvector" in str(statement):  # the server's lexeme lookup: answer it, it is not the statement timed
            return self.lexemes
        self.statements.append((statement, params))
        return []

    def compiled(self) -> list[tuple[str, list[str], dict[str, Any]]]:
        return [_compiled(st, params) for st, params in self.statements]


def _compiled(statement, params: dict[str, Any] | None = None) -> tuple[str, list[str], dict[str, Any]]:
    from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg

    if params:
        statement = statement.bindparams(**params) if hasattr(statement, "bindparams") else statement.params(**params)
    c = statement.compile(dialect=pg_asyncpg.dialect(), compile_kwargs={"render_postcompile": True})
    return str(c), list(c.positiontup or []), dict(c.params)


def _is_setting(sql: str) -> bool:
    return "hnsw." in sql or "ivfflat." in sql or sql.lstrip().upper().startswith("SET ")


class ServerSql:
    """A statement as the server sends it, with the settings statements (SET LOCAL / set_config) it runs
    before it in the same transaction; `sets` holds (sql, args) pairs."""

    def __init__(self, name: str, sets: list[tuple[str, list[Any]]], sql: str, names: list[str], params: dict[str, Any],
                 vector_name: str | None):
        self.name, self.sets, self.sql, self.names, self.params, self.vector_name = name, sets, sql, names, params, vector_name

    def args(self, vector: np.ndarray | None = None) -> list[Any]:
        out = []
        for n in self.names:
            v = self.params[n]
            if n == self.vector_name and vector is not None:
                v = vector
            elif isinstance(v, list) and n == self.vector_name:
                v = np.asarray(v, dtype=np.float32)
            out.append(v)
        return out

    def as_dict(self) -> dict[str, Any]:
        shown = {n: (f"<{DIM}-d query vector>" if n == self.vector_name else self.params[n]) for n in self.names}
        return {"sets": self.sets, "sql": self.sql, "params_in_order": shown}


def _sets(compiled: list[tuple[str, list[str], dict[str, Any]]]) -> list[tuple[str, list[Any]]]:
    return [(sql, [params[n] for n in names]) for sql, names, params in compiled if _is_setting(sql)]


def _vector_param(names: list[str], params: dict[str, Any]) -> str:
    return next(n for n in names if isinstance(params[n], list) and len(params[n]) == DIM and params[n][0] == 0.123456)


async def archival_sql(archive_id: str, top_k: int, tags: list[str]) -> ServerSql:
    from memvm.search import archival

    cap = _Capture()
    marker = [0.123456] * DIM
    await archival.search_passages(cap, archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=marker, top_k=top_k, tags=tags)
    compiled = cap.compiled()
    sql, names, params = next(c for c in compiled if "<=>" in c[0])
    return ServerSql("archival" + ("+tags" if tags else ""), _sets(compiled), sql, names, params, _vector_param(names, params))


async def conversation_sql(conn: asyncpg.Connection, agent_id: str, query: str, limit: int, mode: str) -> ServerSql:
    """The server's ranking statement for this query and search mode: its full-text branches (one per
    query lexeme, so it is compiled per query; the lexemes come from PostgreSQL, as in the server)
    and/or its vector branch, in one UNION ALL."""
    from memvm.search import conversation

    rows = await conn.fetch("SELECT lexeme FROM unnest(to_tsvector('english', $1::text)) ORDER BY positions[1] LIMIT $2",
                            query, conversation.MAX_LEXEMES)
    cap = _Capture([r["lexeme"] for r in rows])
    marker = [0.123456] * DIM
    await conversation.search_messages(cap, agent_ids=[agent_id], query=query, vector=conversation.QueryVector(MODEL, DIM, marker),
                                       mode=mode, limit=limit)
    compiled = cap.compiled()
    sql, names, params = next(c for c in compiled if "UNION ALL" in c[0] or "@@" in c[0] or "<=>" in c[0])
    vector_name = _vector_param(names, params) if mode != "fts" else None
    return ServerSql(f"conversation {mode} rankings", _sets(compiled), sql, names, params, vector_name)


_VEC_LITERAL = re.compile(r"'\[[-0-9.e,]{200,}\]'")


def short_plan(text: str) -> str:
    return _VEC_LITERAL.sub("'[<384-d query vector>]'", text)


def sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, np.ndarray):
        return "'[" + ",".join(repr(float(x)) for x in v) + "]'"
    if isinstance(v, list):
        return "ARRAY[" + ",".join(sql_literal(x) for x in v) + "]::text[]"
    return "'" + str(v).replace("'", "''") + "'"


async def run_server_sql(conn: asyncpg.Connection, s: ServerSql, args: list[Any], *, explain: str | None = None) -> tuple[float, list]:
    async with conn.transaction():
        for st, st_args in s.sets:
            await conn.execute(st, *st_args)
        t = time.perf_counter()
        rows = await conn.fetch((explain + " " if explain else "") + s.sql, *args)
        dt = time.perf_counter() - t
    return dt, rows


# ---------------------------------------------------------------- the bench
class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.rng = np.random.default_rng(a.seed)
        self.texts = TextMaker(np.random.default_rng(a.seed + 1))
        self.report: dict[str, Any] = {"machine": machine_facts(), "params": {k: v for k, v in vars(a).items()},
                                       "targets": TARGETS, "phases": {}, "http_errors": [], "notes": []}
        self.deadline = time.perf_counter() + a.time_limit
        self.qvec: dict[str, np.ndarray] = {}
        self.request_no = 0  # makes every fresh query text unique over the whole run
        self.client: httpx.AsyncClient | None = None
        self.pg: asyncpg.Connection | None = None
        self.embedder = None
        self.pg_pid: int | None = None
        self.db_url: str | None = None

    # ---- plumbing
    def left(self) -> float:
        return self.deadline - time.perf_counter()

    async def http(self, method: str, path: str, *, expect_ok: bool = True, **kw) -> tuple[float, httpx.Response]:
        assert self.client is not None
        t = time.perf_counter()
        r = await self.client.request(method, path, **kw)
        dt = time.perf_counter() - t
        if r.status_code >= 400:
            req = r.request
            err = {"method": method, "url": str(req.url), "request_body": (req.content or b"").decode("utf-8", "replace")[:2000],
                   "status": r.status_code, "response_body": r.text[:2000]}
            if len([e for e in self.report["http_errors"] if e["url"].split("?")[0] == err["url"].split("?")[0]]) < 3:
                self.report["http_errors"].append(err)
            log(f"HTTP {r.status_code} on {method} {req.url}: {r.text[:300]}")
            if expect_ok:
                raise RuntimeError(f"{method} {path} -> {r.status_code}: {r.text[:500]}")
        return dt, r

    async def connect_pg(self) -> asyncpg.Connection:
        # The server's own per-connection settings (jit, custom plans; the search settings are captured per statement), so the
        # SQL timed here runs as it does in the server.
        from memvm.db.engine import SESSION_SETTINGS

        if self.a.pg_dsn:
            conn = await asyncpg.connect(self.a.pg_dsn, server_settings=SESSION_SETTINGS)
            self.db_url = "postgresql+asyncpg://" + self.a.pg_dsn.split("://", 1)[1]
        else:
            sock, port = pg_socket_of(Path(self.a.data_dir))
            conn = await asyncpg.connect(host=sock, port=port, user=self.a.pg_user, database=self.a.pg_database,
                                         server_settings=SESSION_SETTINGS)
            self.pg_pid = int((Path(self.a.data_dir) / "pg" / "postmaster.pid").read_text().split()[0])
            self.db_url = f"postgresql+asyncpg://{self.a.pg_user}@/{self.a.pg_database}?host={sock}&port={port}"
        await register_vector(conn)
        return conn

    # ---- 1. embedding throughput (in-process)
    def embedding_throughput(self) -> None:
        from memvm.embeddings.local import LocalMiniLM

        emb = LocalMiniLM()
        t = time.perf_counter()
        emb.load()
        load_s = time.perf_counter() - t
        self.embedder = emb
        emb.embed_sync(["warm up the model"])
        singles = []
        n_single = self.a.embed_single
        c0 = time.process_time()
        for i in range(n_single):
            q = QUERIES[i % len(QUERIES)]
            t = time.perf_counter()
            emb.embed_sync([q])
            singles.append(time.perf_counter() - t)
        single_cpu_ms = (time.process_time() - c0) * 1000 / n_single
        single_t1: list[float] = []
        if self.a.embed_single:
            emb1 = LocalMiniLM(threads=1)
            emb1.embed_sync(["warm up the model"])
            for i in range(self.a.embed_single):
                t = time.perf_counter()
                emb1.embed_sync([QUERIES[i % len(QUERIES)]])
                single_t1.append(time.perf_counter() - t)
            del emb1
        # the query vectors the server computes: one text per call, as search does
        for q in QUERIES:
            self.qvec[q] = emb.embed_sync([q])[0]
        # these texts are also the anchors of the synthetic vectors (AnchorVectorMaker)
        sents = [self.texts.text(i % self.a.clusters, 24) for i in range(self.a.embed_batch)]
        t, c0 = time.perf_counter(), time.process_time()
        self.anchor_vectors = emb.embed_sync(sents)
        self.anchor_clusters = np.arange(len(sents)) % self.a.clusters
        batch_s = time.perf_counter() - t
        batch_cpu_ms = (time.process_time() - c0) * 1000 / len(sents)
        # also as the archive-batch endpoint sees it: 200 passages per request
        t = time.perf_counter()
        emb.embed_sync(sents[:200])
        b200 = time.perf_counter() - t
        s = stats_ms(singles)
        out = {
            "model": MODEL, "threads": emb._threads, "load_seconds": round(load_s, 2),
            "single": {**s, "sentences_per_s": round(len(singles) / sum(singles), 1), "cpu_ms_per_sentence": round(single_cpu_ms, 2),
                       "text": "short queries (4-9 words), one per call"},
            "batch": {"sentences": len(sents), "seconds": round(batch_s, 2), "sentences_per_s": round(len(sents) / batch_s, 1),
                      "cpu_ms_per_sentence": round(batch_cpu_ms, 2),
                      "text": "24 words each, embed_sync(list) in chunks of 64 / 2048 tokens"},
            "single_1_thread": {**stats_ms(single_t1), "text": "same, LocalMiniLM(threads=1)"},
            "batch_200": {"sentences": 200, "seconds": round(b200, 3), "sentences_per_s": round(200 / b200, 1)},
            "loadavg": loadavg(),
        }
        self.report["embedding"] = out
        log(f"embedding: load {load_s:.2f}s; single p50 {s['p50_ms']} ms p95 {s['p95_ms']} ms ({out['single']['sentences_per_s']}/s, "
            f"{single_cpu_ms:.1f} CPU ms each); batch {out['batch']['sentences_per_s']} sentences/s ({batch_cpu_ms:.1f} CPU ms each)")

    # ---- data generation
    def make_centres(self) -> np.ndarray:
        sents = [self.texts.centre_sentence(i) for i in range(self.a.clusters)]
        assert self.embedder is not None
        return self.embedder.embed_sync(sents)

    async def drop_index(self, name: str) -> str | None:
        ddl = await self.pg.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", name)
        if ddl and self.a.index_mode == "rebuild":
            await self.pg.execute(f"DROP INDEX {name}")
        return ddl

    async def build_index(self, name: str, ddl: str | None, table: str) -> dict[str, Any]:
        out: dict[str, Any] = {"index": name, "mode": self.a.index_mode}
        if ddl and self.a.index_mode == "rebuild":
            await self.pg.execute(f"SET maintenance_work_mem = '{self.a.maintenance_work_mem}'")
            t = time.perf_counter()
            await self.pg.execute(ddl)
            out["build_seconds"] = round(time.perf_counter() - t, 1)
            await self.pg.execute("RESET maintenance_work_mem")
        t = time.perf_counter()
        await self.pg.execute(f"VACUUM (ANALYZE) {table}")
        out["vacuum_analyze_seconds"] = round(time.perf_counter() - t, 1)
        out["index_mb"] = round((await self.pg.fetchval("SELECT pg_relation_size($1::regclass)", name) or 0) / 2**20, 1)
        out["table_mb"] = round((await self.pg.fetchval("SELECT pg_total_relation_size($1::regclass)", table) or 0) / 2**20, 1)
        out["ddl"] = ddl
        return out

    async def copy_passages(self, archive_id: str, n: int, start: int, vm: VectorMaker) -> dict[str, Any]:
        chunk = 10_000
        t0 = time.perf_counter()
        rare = 0
        for off in range(0, n, chunk):
            m = min(chunk, n - off)
            clusters = self.rng.integers(0, self.a.clusters, m)
            vecs = vm.make(clusters)
            u = self.rng.random(m)
            recs = []
            for i in range(m):
                tags = [RARE_TAG] if u[i] < 0.02 else ([COMMON_TAG] if u[i] < 0.22 else [])
                rare += u[i] < 0.02
                recs.append((f"passage-{uuid.uuid4()}", archive_id, f"Note {start + off + i}: " + self.texts.text(int(clusters[i]), 14),
                             vecs[i], MODEL, DIM, tags, "{}", "api"))
            await self.pg.copy_records_to_table(
                "passage", records=recs,
                columns=["id", "archive_id", "text", "embedding", "embedding_model", "embedding_dim", "tags", "metadata", "writer_type"])
            if self.left() < 0:
                raise TimeoutError("time limit reached while loading passages")
        return {"rows": n, "rare_tagged": int(rare), "copy_seconds": round(time.perf_counter() - t0, 1)}

    async def copy_messages(self, agent_id: str, n: int, vm: VectorMaker) -> dict[str, Any]:
        chunk = 10_000
        t0 = time.perf_counter()
        base = _dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(days=365)
        step = _dt.timedelta(days=365) / max(1, n)
        for off in range(0, n, chunk):
            m = min(chunk, n - off)
            clusters = self.rng.integers(0, self.a.clusters, m)
            vecs = vm.make(clusters)
            lens = self.rng.integers(8, 41, m)
            recs = []
            for i in range(m):
                k = off + i
                recs.append((f"message-{uuid.uuid4()}", agent_id, "user" if k % 2 == 0 else "assistant", "message",
                             self.texts.text(int(clusters[i]), int(lens[i])), False, vecs[i], MODEL, DIM, base + k * step))
            await self.pg.copy_records_to_table(
                "message", records=recs,
                columns=["id", "agent_id", "role", "kind", "content", "in_context", "embedding", "embedding_model", "embedding_dim", "created_at"])
            if self.left() < 0:
                raise TimeoutError("time limit reached while loading messages")
        return {"rows": n, "copy_seconds": round(time.perf_counter() - t0, 1)}

    # ---- HTTP objects
    async def create_agent(self, name: str) -> str:
        body = {
            "name": name,
            "memory_blocks": [{"label": "persona", "value": "A search benchmark agent.", "limit": 5000},
                              {"label": "human", "value": "The human is a benchmark.", "limit": 5000}],
            # never called: search does not use the chat model
            "llm_config": {"model": "unused", "model_endpoint_type": "openai", "model_endpoint": "http://127.0.0.1:9/v1", "context_window": 32000},
        }
        _, r = await self.http("POST", "/v1/agents/", json=body)
        return r.json()["id"]

    # ---- measuring
    async def timed_queries(self, name: str, make_req, n: int, conc: int, *, fresh: bool = True) -> dict[str, Any]:
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
        wall = time.perf_counter() - t0
        cpu1, db1 = proc_cpu_s(self.a.server_pid), proc_cpu_s(self.pg_pid)
        s = {"op": name, "concurrency": conc, **stats_ms(lat), "ops_s": round(len(lat) / wall, 1) if wall else None, "errors": errors}
        if cpu0 is not None and cpu1 is not None and lat:
            s["server_cpu_ms_per_op"] = round((cpu1 - cpu0) * 1000 / len(lat), 2)
        if db0 is not None and db1 is not None and lat:
            s["db_cpu_ms_per_op"] = round((db1 - db0) * 1000 / len(lat), 2)
        log(f"  {name:<34} c={conc:<2} n={s.get('n')} p50={s.get('p50_ms')} p95={s.get('p95_ms')} ms  {s['ops_s']}/s  "
            f"CPU memvm {s.get('server_cpu_ms_per_op')} + pg {s.get('db_cpu_ms_per_op')} ms/op  errors={errors or ''}")
        return {"stats": s, "bodies": bodies, "texts": texts}

    def fresh_text(self, i: int) -> str:
        """A query text the server has not seen (its query-vector cache misses)."""
        self.request_no += 1
        return f"{QUERIES[i % len(QUERIES)]} (#{self.request_no})"

    def vector_of(self, text: str) -> np.ndarray:
        """The vector the server computes for a query text (same model, one text per call)."""
        if text not in self.qvec:
            self.qvec[text] = self.embedder.embed_sync([text])[0]
        return self.qvec[text]

    async def warm(self, make_req, k: int = 5) -> None:
        for i in range(k):
            method, path, kw = make_req(QUERIES[i % len(QUERIES)])
            await self.http(method, path, expect_ok=False, **kw)

    async def exact_passages(self, conn: asyncpg.Connection, archive_id: str, q: np.ndarray, k: int, tag: str | None) -> list[str]:
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_indexscan = off")
            await conn.execute("SET LOCAL enable_bitmapscan = off")
            # ORDER BY the uncast column: the HNSW index is on (embedding::vector(384)), so it cannot serve this
            sql = ("SELECT id FROM passage WHERE archive_id = $1 AND embedding_dim = 384 AND embedding_model = $2"
                   + (" AND tags && $4::text[]" if tag else "") + " ORDER BY embedding <=> $3 LIMIT " + str(int(k)))
            args = [archive_id, MODEL, q] + ([[tag]] if tag else [])
            return [r["id"] for r in await conn.fetch(sql, *args)]

    async def contrast(self, conn: asyncpg.Connection, archive_id: str) -> dict[str, Any]:
        """Mean cosine similarity of each query's 1st, 10th, 100th and 1000th exact neighbour: how far the
        true top-10 stands out from the crowd (little contrast makes any ANN index miss neighbours)."""
        ks = (1, 10, 100, 1000)
        acc: dict[int, list[float]] = {k: [] for k in ks}
        for q in QUERIES:
            async with conn.transaction():
                await conn.execute("SET LOCAL enable_indexscan = off")
                rows = await conn.fetch("SELECT 1 - (embedding <=> $2) AS sim FROM passage WHERE archive_id = $1 "
                                        "ORDER BY embedding <=> $2 LIMIT 1000", archive_id, self.qvec[q])
            for k in ks:
                if len(rows) >= k:
                    acc[k].append(rows[k - 1]["sim"])
        return {f"sim@{k}": round(float(np.mean(v)), 3) for k, v in acc.items() if v}

    async def fts_variants(self, conn: asyncpg.Connection, agent_id: str) -> dict[str, Any]:
        """Where the full-text ranking's time goes, and what other shapes would cost (SQL only, each over
        every query text): finding the matches alone, ranking them with ts_rank or ts_rank_cd, an all-words
        (AND) query, and ranking only the 1000 most recent matches. (The server's own statement is sql_fts.)"""
        base = "FROM message WHERE agent_id = $1 AND kind = 'message' AND fts @@ to_tsquery('english', $2)"
        variants = {
            "match only (count, bitmap scan)": ("SELECT count(*) " + base, "or"),
            "match + ORDER BY ts_rank LIMIT 50": ("SELECT id " + base + " ORDER BY ts_rank(fts, to_tsquery('english', $2)) DESC, seq DESC LIMIT 50", "or"),
            "match + ORDER BY ts_rank_cd LIMIT 50": ("SELECT id " + base + " ORDER BY ts_rank_cd(fts, to_tsquery('english', $2)) DESC, seq DESC LIMIT 50", "or"),
            "all words (AND) + ts_rank_cd LIMIT 50": ("SELECT id " + base + " ORDER BY ts_rank_cd(fts, to_tsquery('english', $2)) DESC, seq DESC LIMIT 50", "and"),
            "rank only the 1000 newest matches": ("SELECT id FROM (SELECT id, seq, fts " + base + " ORDER BY seq DESC LIMIT 1000) m "
                                                  "ORDER BY ts_rank_cd(fts, to_tsquery('english', $2)) DESC, seq DESC LIMIT 50", "or"),
        }
        out = {}
        for name, (sql, kind) in variants.items():
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
            log(f"  fts variant: {name:<48} p50 {out[name]['p50_ms']} ms p95 {out[name]['p95_ms']} ms (rows median {out[name]['rows_median']})")
        return out

    async def exact_messages(self, conn: asyncpg.Connection, agent_id: str, q: np.ndarray, k: int) -> list[str]:
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_indexscan = off")
            await conn.execute("SET LOCAL enable_bitmapscan = off")
            rows = await conn.fetch("SELECT id FROM message WHERE agent_id = $1 AND kind = 'message' AND embedding_dim = 384 "
                                    "AND embedding_model = $2 ORDER BY embedding <=> $3 LIMIT " + str(int(k)), agent_id, MODEL, q)
            return [r["id"] for r in rows]

    async def sql_profile(self, conn: asyncpg.Connection, s: ServerSql, n: int, vec_for=None, sql_for=None) -> dict[str, Any]:
        """The server's statement run directly (same SET LOCALs, same parameters), timed at the client;
        EXPLAIN (ANALYZE, BUFFERS) of it, and the plan PostgreSQL would use for it as a generic
        (parameter-independent) prepared statement, which asyncpg's statement cache can end up running."""
        lat = []
        for i in range(n):
            q = QUERIES[i % len(QUERIES)]
            st = sql_for(q) if sql_for else s
            dt, _ = await run_server_sql(conn, st, st.args(vec_for(q) if vec_for else None))
            lat.append(dt)
        q0 = QUERIES[0]
        st0 = sql_for(q0) if sql_for else s
        args0 = st0.args(vec_for(q0) if vec_for else None)
        _, rows = await run_server_sql(conn, st0, args0, explain="EXPLAIN (ANALYZE, BUFFERS)")
        plan = short_plan("\n".join(r[0] for r in rows))
        generic = None
        try:
            async with conn.transaction():
                for x, x_args in st0.sets:
                    await conn.execute(x, *x_args)
                await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                await conn.execute("PREPARE bench_generic AS " + st0.sql)
                try:
                    rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_generic(" + ", ".join(sql_literal(v) for v in args0) + ")")
                    generic = short_plan("\n".join(r[0] for r in rows))
                finally:
                    await conn.execute("DEALLOCATE bench_generic")
        except Exception as e:
            generic = f"(generic plan check failed: {type(e).__name__}: {e})"
        return {"statement": st0.as_dict(), "client_timed": stats_ms(lat), "explain_analyze": plan, "generic_plan_explain_analyze": generic}

    async def inprocess_profile(self, kind: str, agent_id: str, n: int) -> dict[str, Any]:
        """Where the time of one search goes, measured in this process on memvm's own code and the same
        database: (1) the runtime function the endpoint calls, with every stage timed by wrapping the
        module attributes it looks up (nothing in src/ is changed); (2) the whole endpoint through
        FastAPI in-process (httpx.ASGITransport: no socket, no uvicorn); (3) cProfile of (2)."""
        import cProfile
        import io
        import pstats

        from memvm.agents import service as agents_service
        from memvm.archives import repository as arch_repo
        from memvm.config import Settings
        from memvm.db.database import DatabaseTarget
        from memvm.main import create_app
        from memvm.runtime import archival as rt_arch
        from memvm.runtime import recall as rt_recall
        from memvm.search import conversation as conv

        settings = Settings(database_url=self.db_url, migrate_on_start=False, embedding_worker=False)
        app = create_app(settings, database=DatabaseTarget(settings.database_url, "bench (in-process)"))
        timings: dict[str, list[float]] = {}
        patched: list[tuple[Any, str, Any]] = []

        def wrap(obj: Any, attr: str, label: str) -> None:
            orig = getattr(obj, attr)

            async def timed(*args, **kw):
                t = time.perf_counter()
                try:
                    return await orig(*args, **kw)
                finally:
                    timings.setdefault(label, []).append(time.perf_counter() - t)

            setattr(obj, attr, timed)
            patched.append((obj, attr, orig))

        out: dict[str, Any] = {"runs": n}
        async with app.router.lifespan_context(app):
            deps = app.state.runtime
            embedder = deps.embedders.for_handle(None)
            await embedder.embed(["warm up"])
            wrap(embedder, "embed", "embed (to_thread + ONNX)")
            wrap(agents_service, "get_agent", "get_agent (SELECT agent)")
            if kind == "archival":
                wrap(arch_repo, "search_scope", "transaction 1: search_scope (agent + archives, one SELECT)")
                wrap(rt_arch, "search_passages", "search_passages (vector SQL + result rows)")

                async def call(q: str):
                    from memvm.archives.schemas import SearchFilters
                    return await rt_arch.search_for_agent(deps, agent_id, SearchFilters(query=q, top_k=10))

                path = f"/v1/agents/{agent_id}/archival-memory/search"

                def req(q: str):
                    return "GET", path, {"params": {"query": q, "top_k": 10}}
            else:
                wrap(conv, "query_lexemes", "lexeme lookup (SELECT to_tsvector)")
                wrap(rt_recall, "search_messages", "transaction 2: search_messages (lexemes, rankings statement, fetch rows)")

                async def call(q: str):
                    return await rt_recall.search_history(deps, query=q, agent_id=agent_id, mode="hybrid", roles=[], start_date=None,
                                                          end_date=None, limit=self.a.limit)

                def req(q: str):
                    return "POST", "/v1/agents/messages/search", {"json": {"query": q, "agent_id": agent_id, "search_mode": "hybrid", "limit": self.a.limit}}
            try:
                for i in range(3):
                    await call(QUERIES[i])
                timings.clear()
                total = []
                for i in range(n):
                    t = time.perf_counter()
                    await call(self.fresh_text(i))
                    total.append(time.perf_counter() - t)
                stages = {k: stats_ms(v) for k, v in timings.items()}
                out["runtime_call_total"] = stats_ms(total)
                out["stages"] = stages
                out["stage_calls_per_search"] = {k: round(len(v) / n, 2) for k, v in timings.items()}
            finally:
                for obj, attr, orig in reversed(patched):
                    if obj is embedder:
                        del obj.embed  # back to the class's method
                    else:
                        setattr(obj, attr, orig)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench.local") as c:
                for i in range(3):
                    method, path_, kw = req(QUERIES[i])
                    await c.request(method, path_, **kw)
                lat = []
                for i in range(n):
                    method, path_, kw = req(self.fresh_text(i))
                    t = time.perf_counter()
                    r = await c.request(method, path_, **kw)
                    lat.append(time.perf_counter() - t)
                    r.raise_for_status()
                out["asgi_in_process"] = stats_ms(lat)
                prof = cProfile.Profile()
                prof.enable()
                for i in range(n):
                    method, path_, kw = req(self.fresh_text(i))
                    await c.request(method, path_, **kw)
                prof.disable()
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
                out["cprofile_cumulative_top40"] = buf.getvalue()[-12000:]
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
                out["cprofile_tottime_top25"] = buf.getvalue()[-8000:]
        log(f"  in-process {kind}: runtime call p50 {out['runtime_call_total']['p50_ms']} ms; ASGI p50 {out['asgi_in_process']['p50_ms']} ms; "
            + "; ".join(f"{k} p50 {v['p50_ms']}" for k, v in out["stages"].items()))
        return out

    async def http_floor(self, n: int = 100) -> dict[str, Any]:
        lat = []
        for _ in range(n):
            dt, _ = await self.http("GET", "/v1/health/")
            lat.append(dt)
        return stats_ms(lat)

    async def archival_phase(self, label: str, agent_id: str, archive_id: str, size: int, conn2: asyncpg.Connection) -> dict[str, Any]:
        a = self.a
        out: dict[str, Any] = {"size": size, "loadavg_before": loadavg()}

        def plain(q: str):
            return "GET", f"/v1/agents/{agent_id}/archival-memory/search", {"params": {"query": q, "top_k": 10}}

        def tagged(q: str):
            return "GET", f"/v1/agents/{agent_id}/archival-memory/search", {"params": {"query": q, "top_k": 10, "tags": RARE_TAG}}

        await self.warm(plain)
        runs = {}
        for conc in a.concurrency:
            runs[f"plain_c{conc}"] = await self.timed_queries(f"archival search @{size}", plain, a.queries * (1 if conc == 1 else 2), conc)
        await self.warm(tagged, 3)
        runs["tagged_c1"] = await self.timed_queries(f"archival search +tag(2%) @{size}", tagged, a.queries, 1)
        await self.warm(plain, len(QUERIES))  # every text seen once: the timed requests below are cache hits
        runs["repeated_c1"] = await self.timed_queries(f"archival search, repeated text @{size}", plain, a.queries, 1, fresh=False)
        # recall against the exact top-10 of the same vector
        recalls, t_recalls, filled = [], [], []
        for q in QUERIES:
            if q not in runs["plain_c1"]["bodies"] or q not in runs["tagged_c1"]["bodies"]:
                continue
            api = [h["id"] for h in runs["plain_c1"]["bodies"][q].get("results", [])]
            exact = await self.exact_passages(conn2, archive_id, self.vector_of(runs["plain_c1"]["texts"][q]), 10, None)
            if exact:
                recalls.append(len(set(api) & set(exact)) / len(exact))
            tb = runs["tagged_c1"]["bodies"].get(q, {}).get("results", [])
            texact = await self.exact_passages(conn2, archive_id, self.vector_of(runs["tagged_c1"]["texts"][q]), 10, RARE_TAG)
            filled.append(len(tb))
            if texact:
                t_recalls.append(len({h["id"] for h in tb} & set(texact)) / len(texact))
            if not all(RARE_TAG in h.get("tags", []) for h in tb):
                self.report["notes"].append(f"tag filter leak at {size}: a result without {RARE_TAG}")
        out["recall_per_query"] = [round(x, 2) for x in recalls]
        out["similarity_contrast"] = await self.contrast(conn2, archive_id)
        out["recall_at_10"] = round(float(np.mean(recalls)), 4) if recalls else None
        out["recall_at_10_min"] = round(float(np.min(recalls)), 2) if recalls else None
        out["queries_recall_below_0_5"] = int(sum(x < 0.5 for x in recalls))
        out["tagged_recall_at_10"] = round(float(np.mean(t_recalls)), 4) if t_recalls else None
        out["tagged_filled"] = {"queries": len(filled), "min": min(filled) if filled else None, "full": sum(f == 10 for f in filled)}
        for k, v in runs.items():
            out[k] = v["stats"]
        log(f"  recall@10 {out['recall_at_10']} (min {out['recall_at_10_min']}); tagged recall {out['tagged_recall_at_10']}, "
            f"top_k filled {out['tagged_filled']['full']}/{len(filled)}")
        # profile: the server's SQL run directly, EXPLAIN ANALYZE, ef_search sweep (recall vs SQL time)
        plain_sql = await archival_sql(archive_id, 10, [])
        tag_sql = await archival_sql(archive_id, 10, [RARE_TAG])
        out["sql_plain"] = await self.sql_profile(conn2, plain_sql, a.sql_runs, vec_for=lambda q: self.qvec[q])
        out["sql_tagged"] = await self.sql_profile(conn2, tag_sql, max(10, a.sql_runs // 2), vec_for=lambda q: self.qvec[q])
        log(f"  server SQL alone: plain p50 {out['sql_plain']['client_timed']['p50_ms']} ms p95 {out['sql_plain']['client_timed']['p95_ms']}; "
            f"tagged p50 {out['sql_tagged']['client_timed']['p50_ms']} ms")
        sweep = []
        for ef in a.ef_sweep:
            s = ServerSql(plain_sql.name, [("SET LOCAL hnsw.iterative_scan = relaxed_order", []), (f"SET LOCAL hnsw.ef_search = {ef}", []),
                                           ("SET LOCAL enable_seqscan = off", [])],
                          plain_sql.sql, plain_sql.names,
                          plain_sql.params, plain_sql.vector_name)
            lat, rec = [], []
            for q in QUERIES:
                dt, rows = await run_server_sql(conn2, s, s.args(self.qvec[q]))
                lat.append(dt)
                exact = await self.exact_passages(conn2, archive_id, self.qvec[q], 10, None)
                rec.append(len({r["id"] for r in rows} & set(exact)) / max(1, len(exact)))
            sweep.append({"ef_search": ef, "recall_at_10": round(float(np.mean(rec)), 4), **stats_ms(lat)})
            log(f"  ef_search={ef:<4} recall@10 {sweep[-1]['recall_at_10']}  SQL p50 {sweep[-1]['p50_ms']} ms p95 {sweep[-1]['p95_ms']}")
        out["ef_sweep_sql_only"] = sweep
        if a.profile:
            out["in_process"] = await self.inprocess_profile("archival", agent_id, a.profile_runs)
        out["loadavg_after"] = loadavg()
        return out

    async def run(self) -> dict[str, Any]:
        a = self.a
        self.client = httpx.AsyncClient(base_url=a.base_url, timeout=httpx.Timeout(60.0),
                                        limits=httpx.Limits(max_connections=32, max_keepalive_connections=32))
        self.pg = await self.connect_pg()
        conn2 = await self.connect_pg()
        try:
            settings = {r["name"]: r["setting"] + (r["unit"] or "") for r in await self.pg.fetch(
                "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1::text[])",
                ["shared_buffers", "work_mem", "maintenance_work_mem", "max_parallel_maintenance_workers", "effective_cache_size",
                 "max_parallel_workers_per_gather", "jit", "plan_cache_mode"])}
            self.report["postgres"] = {"version": await self.pg.fetchval("SHOW server_version"),
                                       "pgvector": await self.pg.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
                                       "settings": settings}
            log(f"postgres {self.report['postgres']['version']}, pgvector {self.report['postgres']['pgvector']}, {settings}")

            self.embedding_throughput()
            self.report["http_floor_health"] = await self.http_floor()
            log(f"HTTP floor (GET /v1/health/): p50 {self.report['http_floor_health']['p50_ms']} ms")

            if a.vectors == "anchors":
                vm = AnchorVectorMaker(self.anchor_vectors, self.anchor_clusters, a.clusters, np.random.default_rng(a.seed + 2))
                self.report["data"] = {"vectors": "anchors", "clusters": a.clusters, "anchors": len(self.anchor_vectors),
                                       "row_vector": "normalize(w*e_a + (1-w)*e_b + 0.25*isotropic), e_a, e_b local-model embeddings of "
                                                     "two synthetic texts of the row's cluster, w ~ U(0.5, 1)",
                                       "query_to_nearest_anchor_cos": round(float(np.mean([max(self.anchor_vectors @ self.qvec[q]) for q in QUERIES])), 3)}
            else:
                centres = self.make_centres()
                vm = VectorMaker(centres, np.random.default_rng(a.seed + 2))
                self.report["data"] = {"vectors": "subspace", "clusters": a.clusters, "centres": "local-model embeddings of synthetic topic sentences",
                                       "row_vector": "normalize(centre + 0.6 * 16-d cluster subspace + 0.35 * isotropic)",
                                       "query_to_nearest_centre_cos": round(float(np.mean([max(centres @ self.qvec[q]) for q in QUERIES])), 3)}
                probe = vm.make(np.arange(min(a.clusters, 200)))
                self.report["data"]["row_to_centre_cos"] = round(float(np.mean(np.sum(probe * centres[: len(probe)], axis=1))), 3)
            log(f"data: {self.report['data']}")

            # ---------------- archival
            if a.sizes:
                agent_id = await self.create_agent(f"search-bench-archival-{uuid.uuid4().hex[:6]}")
                _, r = await self.http("POST", "/v1/archives/", json={"name": "search-bench archive"})
                arc = r.json()
                archive_id = arc["id"]
                self.report["archive"] = {"id": archive_id, "embedding_config": arc.get("embedding_config"), "agent_id": agent_id}
                have, attached = 0, False
                for size in a.sizes:
                    if self.left() < 60:
                        self.report["notes"].append(f"skipped archival size {size}: time limit")
                        break
                    ph: dict[str, Any] = {}
                    ddl = await self.drop_index("ix_passage_embedding_384")
                    log(f"archival: loading {size - have} passages (to {size}) ...")
                    ph["load"] = await self.copy_passages(archive_id, size - have, have, vm)
                    log(f"  COPY {ph['load']['copy_seconds']} s; building HNSW index over {size} rows ({a.index_mode}) ...")
                    ph["index"] = await self.build_index("ix_passage_embedding_384", ddl, "passage")
                    log(f"  index: {ph['index']}")
                    have = size
                    if not attached:
                        await self.http("PATCH", f"/v1/agents/{agent_id}/archives/attach/{archive_id}")
                        attached = True
                    else:  # refresh the agent's <memory_metadata> counts after the direct load
                        await self.http("POST", f"/v1/agents/{agent_id}/recompile")
                    ph.update(await self.archival_phase("archival", agent_id, archive_id, size, conn2))
                    self.report["phases"][f"archival_{size}"] = ph

            # ---------------- conversation (hybrid)
            if a.messages and self.left() > 60:
                agent_id = await self.create_agent(f"search-bench-history-{uuid.uuid4().hex[:6]}")
                ph = {"agent_id": agent_id}
                ddl = await self.drop_index("ix_message_embedding_384")
                log(f"conversation: loading {a.messages} messages ...")
                ph["load"] = await self.copy_messages(agent_id, a.messages, vm)
                log(f"  COPY {ph['load']['copy_seconds']} s; building HNSW index ({a.index_mode}) ...")
                ph["index"] = await self.build_index("ix_message_embedding_384", ddl, "message")
                log(f"  index: {ph['index']}")
                pending = await self.pg.fetchval("SELECT count(*) FROM message WHERE agent_id = $1 AND embedding IS NULL", agent_id)
                ph["unembedded_rows"] = pending
                ph["loadavg_before"] = loadavg()

                def mode_req(mode: str):
                    def f(q: str):
                        return "POST", "/v1/agents/messages/search", {"json": {"query": q, "agent_id": agent_id, "search_mode": mode, "limit": a.limit}}
                    return f

                await self.warm(mode_req("hybrid"))
                for conc in a.concurrency:
                    res = await self.timed_queries(f"hybrid message search @{a.messages}", mode_req("hybrid"), a.queries * (1 if conc == 1 else 2), conc)
                    ph[f"hybrid_c{conc}"] = res["stats"]
                    if conc == 1:
                        hits = [len(b) for b in res["bodies"].values()]
                        ph["hybrid_results_per_query"] = {"min": min(hits), "max": max(hits)} if hits else None
                await self.warm(mode_req("hybrid"), len(QUERIES))  # every text seen once: the timed requests are cache hits
                ph["hybrid_repeated_c1"] = (await self.timed_queries(f"hybrid search, repeated text @{a.messages}", mode_req("hybrid"),
                                                                      a.queries, 1, fresh=False))["stats"]
                for mode in ("fts", "vector"):
                    await self.warm(mode_req(mode), 3)
                    res = await self.timed_queries(f"{mode} message search @{a.messages}", mode_req(mode), max(len(QUERIES), a.queries // 2), 1)
                    ph[f"{mode}_c1"] = res["stats"]
                    if mode == "vector":
                        ph["vector_bodies_seen"] = len(res["bodies"])
                        rec = []
                        for q in QUERIES:
                            if q not in res["bodies"]:
                                continue
                            api = [h["message"]["id"] for h in res["bodies"][q]][:10]
                            exact = await self.exact_messages(conn2, agent_id, self.vector_of(res["texts"][q]), 10)
                            rec.append(len(set(api) & set(exact)) / max(1, len(exact)))
                        ph["vector_recall_at_10"] = round(float(np.mean(rec)), 4)
                        ph["vector_recall_per_query"] = [round(x, 2) for x in rec]
                        log(f"  vector-mode recall@10 vs exact: {ph['vector_recall_at_10']}")
                fts_by_query = {q: await conversation_sql(conn2, agent_id, q, a.limit, "fts") for q in QUERIES}
                hybrid_by_query = {q: await conversation_sql(conn2, agent_id, q, a.limit, "hybrid") for q in QUERIES}
                fts_sql, vec_sql = fts_by_query[QUERIES[0]], await conversation_sql(conn2, agent_id, QUERIES[0], a.limit, "vector")
                ph["sql_fts"] = await self.sql_profile(conn2, fts_sql, a.sql_runs, sql_for=fts_by_query.__getitem__)
                ph["sql_hybrid"] = await self.sql_profile(conn2, hybrid_by_query[QUERIES[0]], a.sql_runs, vec_for=self.vector_of,
                                                          sql_for=hybrid_by_query.__getitem__)
                ph["sql_vector"] = await self.sql_profile(conn2, vec_sql, a.sql_runs, vec_for=lambda q: self.qvec[q])
                rec = []
                for q in QUERIES:
                    _, rows = await run_server_sql(conn2, vec_sql, vec_sql.args(self.qvec[q]))
                    exact = await self.exact_messages(conn2, agent_id, self.qvec[q], 10)
                    rec.append(len({r["id"] for r in rows[:10]} & set(exact)) / max(1, len(exact)))
                ph["sql_vector_recall_at_10"] = round(float(np.mean(rec)), 4)
                ph["sql_vector_recall_per_query"] = [round(x, 2) for x in rec]
                log(f"  vector ranking SQL alone: recall@10 {ph['sql_vector_recall_at_10']}")
                if a.profile:
                    ph["in_process"] = await self.inprocess_profile("conversation", agent_id, a.profile_runs)
                # how many rows the any-word tsquery matches (ts_rank_cd is computed for every one of them)
                matches = []
                for q in QUERIES[:12]:
                    matches.append(await conn2.fetchval(
                        "SELECT count(*) FROM message WHERE agent_id = $1 AND kind = 'message' AND fts @@ to_tsquery('english', $2)",
                        agent_id, any_word_query(q)))
                ph["fts_matching_rows"] = {"queries": len(matches), "min": min(matches), "median": int(np.median(matches)), "max": max(matches)}
                ph["fts_variants_sql_only"] = await self.fts_variants(conn2, agent_id)
                log(f"  server SQL alone: fts p50 {ph['sql_fts']['client_timed']['p50_ms']} ms, vector p50 {ph['sql_vector']['client_timed']['p50_ms']} ms; "
                    f"fts matches per query {ph['fts_matching_rows']}")
                ph["loadavg_after"] = loadavg()
                self.report["phases"][f"messages_{a.messages}"] = ph
        finally:
            self.report["machine"]["loadavg_end"] = loadavg()
            await self.client.aclose()
            await self.pg.close()
            await conn2.close()
        self.report["summary"] = self.summary()
        return self.report

    # ---- summary table
    def summary(self) -> list[dict[str, Any]]:
        rows = []

        def cpu(st: dict) -> str:
            a, b = st.get("server_cpu_ms_per_op"), st.get("db_cpu_ms_per_op")
            return "" if a is None else f"{a} + {b}"

        emb = self.report.get("embedding") or {}
        ph = self.report["phases"]
        big = max(self.a.sizes) if self.a.sizes else None
        for size in self.a.sizes:
            p = ph.get(f"archival_{size}")
            if not p:
                continue
            s = p["plain_c1"]
            is_target = size == big and size >= 100_000
            ok = None
            if is_target and s.get("p95_ms") is not None and p.get("recall_at_10") is not None:
                ok = s["p95_ms"] <= TARGETS["archival_search_p95_ms"] and p["recall_at_10"] >= TARGETS["archival_recall_at_10"]
            rows.append({"op": "archival search (HTTP, top_k=10)", "size": size, "p50_ms": s.get("p50_ms"), "p95_ms": s.get("p95_ms"), "cpu": cpu(s),
                         "quality": f"recall@10 {p.get('recall_at_10')}", "target": "p95 ≤ 10 ms, recall ≥ 0.95" if is_target else "-",
                         "pass": ok})
            r = p.get("repeated_c1")
            if r:
                rows.append({"op": "  archival search, repeated text (query vector cached)", "size": size, "p50_ms": r.get("p50_ms"),
                             "p95_ms": r.get("p95_ms"), "cpu": cpu(r), "quality": "-", "target": "-", "pass": None})
            t = p["tagged_c1"]
            f = p["tagged_filled"]
            rows.append({"op": "archival search + tag on 2% (HTTP)", "size": size, "p50_ms": t.get("p50_ms"), "p95_ms": t.get("p95_ms"), "cpu": cpu(t),
                         "quality": f"filled {f['full']}/{f['queries']}, recall@10 {p.get('tagged_recall_at_10')}", "target": "top_k filled",
                         "pass": f["full"] == f["queries"]})
            rows.append({"op": "  archival: server SQL alone", "size": size, "p50_ms": p["sql_plain"]["client_timed"].get("p50_ms"),
                         "p95_ms": p["sql_plain"]["client_timed"].get("p95_ms"), "quality": "-", "target": "-", "pass": None})
        m = ph.get(f"messages_{self.a.messages}")
        if m:
            s = m.get("hybrid_c1") or {}
            ok = None if s.get("p95_ms") is None else (s["p95_ms"] <= TARGETS["hybrid_search_p95_ms"] if self.a.messages >= 100_000 else None)
            rows.append({"op": "hybrid message search (HTTP)", "size": self.a.messages, "p50_ms": s.get("p50_ms"), "p95_ms": s.get("p95_ms"), "cpu": cpu(s),
                         "quality": f"{(m.get('hybrid_results_per_query') or {}).get('min')}–{(m.get('hybrid_results_per_query') or {}).get('max')} hits",
                         "target": "p95 ≤ 20 ms" if self.a.messages >= 100_000 else "-", "pass": ok})
            r = m.get("hybrid_repeated_c1")
            if r:
                rows.append({"op": "  hybrid search, repeated text (query vector cached)", "size": self.a.messages, "p50_ms": r.get("p50_ms"),
                             "p95_ms": r.get("p95_ms"), "cpu": cpu(r), "quality": "-", "target": "-", "pass": None})
            for mode in ("fts", "vector"):
                s = m.get(f"{mode}_c1") or {}
                rows.append({"op": f"  {mode}-only message search (HTTP)", "size": self.a.messages, "p50_ms": s.get("p50_ms"), "p95_ms": s.get("p95_ms"), "cpu": cpu(s),
                             "quality": f"recall@10 {m.get('vector_recall_at_10')}" if mode == "vector" else "-", "target": "-", "pass": None})
            rows.append({"op": "  fts ranking SQL alone", "size": self.a.messages, "p50_ms": m["sql_fts"]["client_timed"].get("p50_ms"),
                         "p95_ms": m["sql_fts"]["client_timed"].get("p95_ms"), "quality": f"{m['fts_matching_rows']['median']} matching rows (median)",
                         "target": "-", "pass": None})
            if "sql_hybrid" in m:
                rows.append({"op": "  hybrid rankings SQL alone (one statement)", "size": self.a.messages,
                             "p50_ms": m["sql_hybrid"]["client_timed"].get("p50_ms"), "p95_ms": m["sql_hybrid"]["client_timed"].get("p95_ms"),
                             "quality": "-", "target": "-", "pass": None})
            rows.append({"op": "  vector ranking SQL alone", "size": self.a.messages, "p50_ms": m["sql_vector"]["client_timed"].get("p50_ms"),
                         "p95_ms": m["sql_vector"]["client_timed"].get("p95_ms"), "quality": "-", "target": "-", "pass": None})
        if emb:
            rows.append({"op": "embed one query (in-process)", "size": 1, "p50_ms": emb["single"]["p50_ms"], "p95_ms": emb["single"]["p95_ms"],
                         "quality": f"{emb['single']['sentences_per_s']} sentences/s", "target": "-", "pass": None})
            rows.append({"op": "embed batch (in-process)", "size": emb["batch"]["sentences"], "p50_ms": None, "p95_ms": None,
                         "quality": f"{emb['batch']['sentences_per_s']} sentences/s", "target": "-", "pass": None})
        fl = self.report.get("http_floor_health") or {}
        rows.append({"op": "  HTTP floor: GET /v1/health/", "size": None, "p50_ms": fl.get("p50_ms"), "p95_ms": fl.get("p95_ms"),
                     "quality": "-", "target": "-", "pass": None})
        return rows


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [f"# memvm search bench — {m['date_utc']}", "",
             f"{m.get('nproc')} cores ({m.get('cpu', '?')}), Python {m['python']}, PostgreSQL {report.get('postgres', {}).get('version')}, "
             f"pgvector {report.get('postgres', {}).get('pgvector')}; load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')}.", "",
             "| op | size | p50 ms | p95 ms | recall@10 / filled | target | pass | CPU ms/op memvm + pg |",
             "|---|---:|---:|---:|---|---|---|---:|"]
    for r in report.get("summary", []):
        p = "" if r["pass"] is None else ("**pass**" if r["pass"] else "**FAIL**")
        lines.append(f"| {r['op']} | {r['size'] if r['size'] is not None else ''} | {r['p50_ms'] if r['p50_ms'] is not None else ''} | "
                     f"{r['p95_ms'] if r['p95_ms'] is not None else ''} | {r['quality']} | {r['target']} | {p} | {r.get('cpu', '')} |")
    lines.append("")
    if report.get("data"):
        lines += [f"Data: {json.dumps(report['data'])}", ""]
    emb = report.get("embedding")
    if emb:
        lines.append(f"Embedding ({emb['model']}, {emb['threads']} ONNX threads, in-process): one short query per call p50 {emb['single']['p50_ms']} ms, "
                     f"p95 {emb['single']['p95_ms']} ms, {emb['single']['sentences_per_s']}/s, {emb['single']['cpu_ms_per_sentence']} CPU ms each; "
                     f"batch of {emb['batch']['sentences']} (24 words each) {emb['batch']['sentences_per_s']} sentences/s, "
                     f"{emb['batch']['cpu_ms_per_sentence']} CPU ms each; 200 per call (an archive batch request) {emb['batch_200']['sentences_per_s']}/s. "
                     f"One query with threads=1: p50 {emb.get('single_1_thread', {}).get('p50_ms')} ms, p95 {emb.get('single_1_thread', {}).get('p95_ms')} ms.")
        lines.append("")
    for name, ph in report["phases"].items():
        lines.append(f"## {name}")
        lines.append("")
        lines.append(f"- load: {json.dumps(ph.get('load'))}")
        ix = dict(ph.get("index") or {})
        ix.pop("ddl", None)
        lines.append(f"- index: {json.dumps(ix)}")
        for k, v in ph.items():
            if isinstance(v, dict) and "p50_ms" in v and "op" in v:
                lines.append(f"- {v['op']} c={v['concurrency']}: n={v['n']} p50 {v['p50_ms']} p95 {v['p95_ms']} p99 {v.get('p99_ms')} ms, "
                             f"{v['ops_s']}/s, server CPU {v.get('server_cpu_ms_per_op')} ms/op, errors {v['errors'] or 0}")
        if "fts_variants_sql_only" in ph:
            lines.append("- full-text ranking variants (SQL only, every query text): " + "; ".join(
                f"{k}: p50 {v['p50_ms']} ms, p95 {v['p95_ms']} ms (rows median {v['rows_median']})" for k, v in ph["fts_variants_sql_only"].items()))
        if "similarity_contrast" in ph:
            lines.append(f"- similarity of the exact neighbours (mean over queries): {json.dumps(ph['similarity_contrast'])}; "
                         f"recall@10 per query: {ph.get('recall_per_query')}")
        if "ef_sweep_sql_only" in ph:
            lines.append("- ef_search sweep (server SQL alone): " + "; ".join(
                f"ef {s['ef_search']}: recall {s['recall_at_10']}, p50 {s['p50_ms']} ms" for s in ph["ef_sweep_sql_only"]))
        ip = ph.get("in_process")
        if ip:
            lines.append(f"- in-process (same code, same DB, no socket): runtime call p50 {ip['runtime_call_total']['p50_ms']} ms "
                         f"p95 {ip['runtime_call_total']['p95_ms']}; whole endpoint via ASGI p50 {ip['asgi_in_process']['p50_ms']} ms "
                         f"p95 {ip['asgi_in_process']['p95_ms']}")
            for k, v in ip["stages"].items():
                lines.append(f"  - {k}: p50 {v['p50_ms']} ms, p95 {v['p95_ms']} ms, {ip['stage_calls_per_search'][k]} calls per search")
        for k in ("sql_plain", "sql_tagged", "sql_fts", "sql_hybrid", "sql_vector"):
            if k in ph:
                lines += ["", f"### {k}: EXPLAIN (ANALYZE, BUFFERS), first query", "", "```", ph[k]["explain_analyze"], "```"]
                lines += ["", "Same statement as a generic prepared plan (plan_cache_mode = force_generic_plan):", "", "```",
                          ph[k].get("generic_plan_explain_analyze") or "", "```"]
        lines.append("")
    if report["http_errors"]:
        lines.append("## HTTP errors")
        for e in report["http_errors"]:
            lines.append(f"- `{e['method']} {e['url']}` body `{e['request_body'][:300]}` → {e['status']} `{e['response_body'][:500]}`")
    if report["notes"]:
        lines.append("## Notes")
        lines += [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", default="http://127.0.0.1:9283")
    ap.add_argument("--data-dir", help="memvm's MEMVM_DATA_DIR (its embedded PostgreSQL socket is found from <dir>/pg/postmaster.pid)")
    ap.add_argument("--pg-dsn", help="or: a DSN of the server's database")
    ap.add_argument("--pg-user", default="postgres")
    ap.add_argument("--pg-database", default="postgres")
    ap.add_argument("--server-pid", type=int, help="memvm pid, for server CPU per request")
    ap.add_argument("--sizes", default="10000,100000", help="archive sizes (the archive grows from one to the next)")
    ap.add_argument("--messages", type=int, default=100_000, help="messages of the conversation-search agent (0 skips)")
    ap.add_argument("--queries", type=int, default=200, help="HTTP requests per measured op at concurrency 1 (at least 36: every query text once)")
    ap.add_argument("--concurrency", default="1", help="comma list; targets are read at 1")
    ap.add_argument("--limit", type=int, default=10, help="limit of the message searches")
    ap.add_argument("--sql-runs", type=int, default=100, help="direct runs of the server's SQL for the breakdown")
    ap.add_argument("--ef-sweep", default="40,100,200,400", help="hnsw.ef_search values for the SQL-only recall/latency sweep")
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--vectors", choices=["anchors", "subspace"], default="anchors",
                    help="anchors: rows are noisy mixtures of two embedded texts (realistic similarity spread); "
                         "subspace: centre + 16-d cluster subspace + isotropic noise (low contrast: a hard case for HNSW)")
    ap.add_argument("--index-mode", choices=["rebuild", "incremental"], default="rebuild",
                    help="rebuild: drop the HNSW index before COPY and recreate it (same DDL) after; incremental: insert with the index in place")
    ap.add_argument("--maintenance-work-mem", default="1GB", help="for the index build session only")
    ap.add_argument("--embed-single", type=int, default=200)
    ap.add_argument("--embed-batch", type=int, default=2048, help="texts embedded in one batch (throughput); also the anchors of --vectors anchors")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="skip the in-process stage timing / cProfile of the server's search code")
    ap.add_argument("--profile-runs", type=int, default=60)
    ap.add_argument("--time-limit", type=float, default=1500.0, help="seconds; phases that would start later are skipped")
    ap.add_argument("--quick", action="store_true", help="2k/20k passages, 20k messages, 60 queries per op")
    ap.add_argument("--out-json")
    ap.add_argument("--out-md")
    a = ap.parse_args()
    host = urllib.parse.urlparse(a.base_url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("--base-url must be loopback")
    if not (a.data_dir or a.pg_dsn):
        raise SystemExit("give --data-dir or --pg-dsn")
    if a.quick:
        a.sizes, a.messages, a.queries, a.sql_runs, a.embed_single, a.embed_batch = "2000,20000", min(a.messages, 20_000), 60, 30, 60, 400
        a.profile_runs = 30
    a.queries = max(a.queries, len(QUERIES))
    a.sizes = [int(x) for x in str(a.sizes).split(",") if x.strip() and int(x) > 0]
    a.concurrency = [int(x) for x in str(a.concurrency).split(",") if x.strip()]
    a.ef_sweep = [int(x) for x in str(a.ef_sweep).split(",") if x.strip()]
    if 1 not in a.concurrency:
        a.concurrency = [1] + a.concurrency
    report = asyncio.run(Bench(a).run())
    md = markdown(report)
    if a.out_json:
        Path(a.out_json).write_text(json.dumps(report, indent=1, default=str))
    if a.out_md:
        Path(a.out_md).write_text(md)
    print()
    print(md.split("\n## ")[0])
    if report["http_errors"]:
        print("HTTP errors:")
        for e in report["http_errors"]:
            print(f"  {e['method']} {e['url']} {e['request_body'][:200]} -> {e['status']} {e['response_body'][:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
