"""The synthetic corpus: word-bearing texts, clustered 384-d vectors, and their COPY into the server's
database around a rebuild of the HNSW index."""

from __future__ import annotations

import argparse
import datetime as _dt
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import numpy as np

from memvm.actors import DEFAULT_ORGANIZATION_ID

from .common import COMMON_TAG, DIM, MODEL, RARE_TAG, log
from .queries import QUERIES

# Kept as space-separated text: 12 x 20 words read better as sentences than as list literals.
_TOPIC_WORDS = {
    "family": "sister brother mother father daughter son wedding birthday anniversary cousin grandmother grandfather "
    "aunt uncle niece nephew baby party reunion gift",
    "work": "project deadline meeting manager report budget client presentation team review promotion salary office "
    "contract proposal roadmap launch quarterly colleague interview",
    "travel": "flight hotel passport airport beach museum train luggage itinerary vacation tokyo paris lisbon mountains "
    "hiking visa booking ferry island camping",
    "cooking": "recipe pasta garlic tomato bread oven soup curry salad cheese chocolate cake dinner breakfast kitchen "
    "spices lemon chicken vegetarian dessert",
    "health": "doctor appointment medication allergy exercise sleep headache dentist vitamins therapy running yoga diet "
    "injury knee blood pressure checkup prescription stretching",
    "garden": "garden tomatoes roses fence compost seeds soil watering lawn shed tulips orchard pruning greenhouse weeds "
    "fertilizer hedge irrigation flowerbed mulch",
    "pets": "dog cat puppy kitten vet leash walk food collar vaccination grooming parrot aquarium hamster training treats "
    "adoption shelter fleas litter",
    "finance": "savings mortgage taxes invoice bank loan insurance pension stocks rent expenses credit account refund "
    "transfer subscription bills investment debt payroll",
    "tech": "laptop phone password backup server database python update router printer keyboard monitor cloud email "
    "software bug deployment kubernetes battery charger",
    "music": "guitar piano concert album song band lyrics drums violin playlist festival rehearsal choir tickets vinyl "
    "jazz orchestra singer melody chords",
    "sports": "football tennis marathon swimming cycling match tournament coach training league goal score stadium race "
    "bicycle gym climbing skiing referee season",
    "home": "apartment landlord repair plumber furniture sofa painting renovation moving boxes keys neighbor heating "
    "window curtains carpet cleaning laundry garage roof",
}
TOPICS: dict[str, list[str]] = {topic: words.split() for topic, words in _TOPIC_WORDS.items()}
_FILLER_WORDS = (
    "the a to and of in that is for it on with as was at be this have from or by not but what all were we when "
    "your can said there use an each which she do how their if will up other about out many then them these so "
    "some her would make like him into time has look two more write go see number no way could people my than "
    "first been call who its now find long down day did get come made may part remember told asked next week "
    "yesterday tomorrow later today plan planned need want think said talk talked mentioned decided"
)
FILLER = _FILLER_WORDS.split()
TEMPLATES = [
    "I told you about the {a} and the {b} last week, and we planned the {c} for {d}.",
    "Remember that my {a} needs a {b} before the {c}; the {d} is also important.",
    "We talked about {a}, {b} and {c} while discussing the {d}.",
    "Notes on {a}: check the {b}, ask about the {c}, and book the {d}.",
    "The {a} went well, but the {b} and {c} still need work before the {d}.",
]
_CHUNK = 10_000
# COPY goes around the server, which keeps each archive's passage and tag counts as it writes
# passages (archives/repository.py): the loaded archive's are counted again from its passages.
_RECOUNT_ARCHIVE = (
    "UPDATE archive SET passage_count = (SELECT count(*) FROM passage WHERE archive_id = $1) WHERE id = $1",
    "INSERT INTO archive_tag (organization_id, archive_id, tag, passages)"
    " SELECT organization_id, archive_id, tag, count(*) FROM passage, unnest(tags) AS tag WHERE archive_id = $1"
    " GROUP BY 1, 2, 3 ON CONFLICT (organization_id, archive_id, tag) DO UPDATE SET passages = excluded.passages",
)


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

    def __init__(
        self, anchors: np.ndarray, anchor_clusters: np.ndarray, n_clusters: int, rng: np.random.Generator, noise: float = 0.25
    ):
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


RowVectors = VectorMaker | AnchorVectorMaker


def _query_to_nearest_cos(points: np.ndarray, qvec: dict[str, np.ndarray]) -> float:
    return round(float(np.mean([max(points @ qvec[q]) for q in QUERIES])), 3)


def anchor_maker(
    a: argparse.Namespace, anchors: np.ndarray, anchor_clusters: np.ndarray, qvec: dict[str, np.ndarray]
) -> tuple[AnchorVectorMaker, dict[str, Any]]:
    vm = AnchorVectorMaker(anchors, anchor_clusters, a.clusters, np.random.default_rng(a.seed + 2))
    facts = {
        "vectors": "anchors",
        "clusters": a.clusters,
        "anchors": len(anchors),
        "row_vector": "normalize(w*e_a + (1-w)*e_b + 0.25*isotropic), e_a, e_b local-model embeddings of "
        "two synthetic texts of the row's cluster, w ~ U(0.5, 1)",
        "query_to_nearest_anchor_cos": _query_to_nearest_cos(anchors, qvec),
    }
    return vm, facts


def subspace_maker(
    a: argparse.Namespace, texts: TextMaker, embedder: Any, qvec: dict[str, np.ndarray]
) -> tuple[VectorMaker, dict[str, Any]]:
    centres = embedder.embed_sync([texts.centre_sentence(i) for i in range(a.clusters)])
    vm = VectorMaker(centres, np.random.default_rng(a.seed + 2))
    facts: dict[str, Any] = {
        "vectors": "subspace",
        "clusters": a.clusters,
        "centres": "local-model embeddings of synthetic topic sentences",
        "row_vector": "normalize(centre + 0.6 * 16-d cluster subspace + 0.35 * isotropic)",
        "query_to_nearest_centre_cos": _query_to_nearest_cos(centres, qvec),
    }
    probe = vm.make(np.arange(min(a.clusters, 200)))
    facts["row_to_centre_cos"] = round(float(np.mean(np.sum(probe * centres[: len(probe)], axis=1))), 3)
    return vm, facts


class Loader:
    """Writes rows straight into the server's tables (COPY): through the API, 100k rows would need 100k
    local-model embeddings (12-15 minutes)."""

    def __init__(
        self,
        pg: asyncpg.Connection,
        a: argparse.Namespace,
        rng: np.random.Generator,
        texts: TextMaker,
        left: Callable[[], float],
    ):
        self.pg, self.a, self.rng, self.texts, self.left = pg, a, rng, texts, left

    async def load_passages(self, archive_id: str, have: int, size: int, vm: RowVectors) -> dict[str, Any]:
        return await self._reload(
            "passage",
            f"archival: loading {size - have} passages (to {size}) ...",
            lambda: self._copy_passages(archive_id, size - have, have, vm),
            f" over {size} rows",
        )

    async def load_messages(self, agent_id: str, n: int, vm: RowVectors) -> dict[str, Any]:
        return await self._reload(
            "message", f"conversation: loading {n} messages ...", lambda: self._copy_messages(agent_id, n, vm), ""
        )

    async def _reload(self, table: str, loading: str, copy: Callable[[], Awaitable[dict[str, Any]]], over: str) -> dict[str, Any]:
        index = f"ix_{table}_embedding_384"
        ddl = await self._drop_index(index)
        log(loading)
        ph: dict[str, Any] = {"load": await copy()}
        log(f"  COPY {ph['load']['copy_seconds']} s; building HNSW index{over} ({self.a.index_mode}) ...")
        ph["index"] = await self._build_index(index, ddl, table)
        log(f"  index: {ph['index']}")
        return ph

    async def _drop_index(self, name: str) -> str | None:
        ddl = await self.pg.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", name)
        if ddl and self.a.index_mode == "rebuild":
            await self.pg.execute(f"DROP INDEX {name}")
        return ddl

    async def _build_index(self, name: str, ddl: str | None, table: str) -> dict[str, Any]:
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

    async def _copy(
        self, table: str, columns: list[str], n: int, vm: RowVectors, rows: Callable[[int, np.ndarray, np.ndarray], list[tuple]]
    ) -> None:
        for off in range(0, n, _CHUNK):
            clusters = self.rng.integers(0, self.a.clusters, min(_CHUNK, n - off))
            await self.pg.copy_records_to_table(table, records=rows(off, clusters, vm.make(clusters)), columns=columns)
            if self.left() < 0:
                raise TimeoutError(f"time limit reached while loading {table}s")

    async def _copy_passages(self, archive_id: str, n: int, start: int, vm: RowVectors) -> dict[str, Any]:
        t0 = time.perf_counter()
        rare = 0

        def rows(off: int, clusters: np.ndarray, vecs: np.ndarray) -> list[tuple]:
            nonlocal rare
            u = self.rng.random(len(clusters))
            rare += int((u < 0.02).sum())
            return [
                (
                    f"passage-{uuid.uuid4()}",
                    archive_id,
                    f"Note {start + off + i}: " + self.texts.text(int(c), 14),
                    vecs[i],
                    MODEL,
                    DIM,
                    [RARE_TAG] if u[i] < 0.02 else ([COMMON_TAG] if u[i] < 0.22 else []),
                    "{}",
                    "api",
                    DEFAULT_ORGANIZATION_ID,
                )
                for i, c in enumerate(clusters)
            ]

        columns = [
            "id",
            "archive_id",
            "text",
            "embedding",
            "embedding_model",
            "embedding_dim",
            "tags",
            "metadata",
            "writer_type",
            "organization_id",
        ]
        await self._copy("passage", columns, n, vm, rows)
        for statement in _RECOUNT_ARCHIVE:
            await self.pg.execute(statement, archive_id)
        return {"rows": n, "rare_tagged": rare, "copy_seconds": round(time.perf_counter() - t0, 1)}

    async def _copy_messages(self, agent_id: str, n: int, vm: RowVectors) -> dict[str, Any]:
        t0 = time.perf_counter()
        base = _dt.datetime.now(_dt.UTC) - _dt.timedelta(days=365)
        step = _dt.timedelta(days=365) / max(1, n)

        def rows(off: int, clusters: np.ndarray, vecs: np.ndarray) -> list[tuple]:
            lens = self.rng.integers(8, 41, len(clusters))
            return [
                (
                    f"message-{uuid.uuid4()}",
                    agent_id,
                    "user" if (off + i) % 2 == 0 else "assistant",
                    "message",
                    self.texts.text(int(c), int(lens[i])),
                    False,
                    vecs[i],
                    MODEL,
                    DIM,
                    base + (off + i) * step,
                    off + i + 1,  # the default conversation's 1, 2, ...
                    DEFAULT_ORGANIZATION_ID,
                )
                for i, c in enumerate(clusters)
            ]

        columns = [
            "id",
            "agent_id",
            "role",
            "kind",
            "content",
            "in_context",
            "embedding",
            "embedding_model",
            "embedding_dim",
            "created_at",
            "seq",
            "organization_id",  # the bench's server runs unauthenticated: its agent is in the default organization
        ]
        await self._copy("message", columns, n, vm, rows)
        return {"rows": n, "copy_seconds": round(time.perf_counter() - t0, 1)}
