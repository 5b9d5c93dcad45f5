"""Phase 1: the local embedding model's throughput, in-process. Its vectors are reused: the query
vectors (recall) and the anchors of the synthetic rows (--vectors anchors)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .common import MODEL, loadavg, log, stats_ms
from .queries import QUERIES
from .session import Bench


def _single_latencies(emb: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        q = QUERIES[i % len(QUERIES)]
        t = time.perf_counter()
        emb.embed_sync([q])
        out.append(time.perf_counter() - t)
    return out


def _one_thread_latencies(n: int) -> list[float]:
    from memvm.embeddings.local import LocalMiniLM

    emb1 = LocalMiniLM(threads=1)
    emb1.embed_sync(["warm up the model"])
    return _single_latencies(emb1, n)


def _singles(emb: Any, n: int) -> tuple[dict[str, Any], float]:
    c0 = time.process_time()
    lat = _single_latencies(emb, n)
    cpu_ms = (time.process_time() - c0) * 1000 / n
    single = {
        **stats_ms(lat),
        "sentences_per_s": round(len(lat) / sum(lat), 1),
        "cpu_ms_per_sentence": round(cpu_ms, 2),
        "text": "short queries (4-9 words), one per call",
    }
    return single, cpu_ms


def _batches(emb: Any, sents: list[str]) -> tuple[np.ndarray, dict[str, Any], dict[str, Any], float]:
    t, c0 = time.perf_counter(), time.process_time()
    vectors = emb.embed_sync(sents)
    batch_s = time.perf_counter() - t
    cpu_ms = (time.process_time() - c0) * 1000 / len(sents)
    batch = {
        "sentences": len(sents),
        "seconds": round(batch_s, 2),
        "sentences_per_s": round(len(sents) / batch_s, 1),
        "cpu_ms_per_sentence": round(cpu_ms, 2),
        "text": "24 words each, embed_sync(list) in chunks of 64 / 2048 tokens",
    }
    # also as the archive-batch endpoint sees it: 200 passages per request
    t = time.perf_counter()
    emb.embed_sync(sents[:200])
    b200 = time.perf_counter() - t
    return vectors, batch, {"sentences": 200, "seconds": round(b200, 3), "sentences_per_s": round(200 / b200, 1)}, cpu_ms


def embedding_throughput(b: Bench) -> tuple[np.ndarray, np.ndarray]:
    """Sets b.embedder, b.report["embedding"] and the query vectors; returns the anchors and their clusters."""
    from memvm.embeddings.local import LocalMiniLM, default_threads

    a = b.a
    threads = default_threads()
    emb = LocalMiniLM(threads=threads)
    t = time.perf_counter()
    emb.load()
    load_s = time.perf_counter() - t
    b.embedder = emb
    emb.embed_sync(["warm up the model"])
    single, single_cpu_ms = _singles(emb, a.embed_single)
    single_t1 = _one_thread_latencies(a.embed_single) if a.embed_single else []
    # the query vectors the server computes: one text per call, as search does
    for q in QUERIES:
        b.qvec[q] = emb.embed_sync([q])[0]
    sents = [b.texts.text(i % a.clusters, 24) for i in range(a.embed_batch)]
    anchors, batch, batch_200, batch_cpu_ms = _batches(emb, sents)
    b.report["embedding"] = {
        "model": MODEL,
        "threads": threads,
        "load_seconds": round(load_s, 2),
        "single": single,
        "batch": batch,
        "single_1_thread": {**stats_ms(single_t1), "text": "same, LocalMiniLM(threads=1)"},
        "batch_200": batch_200,
        "loadavg": loadavg(),
    }
    log(
        f"embedding: load {load_s:.2f}s; single p50 {single['p50_ms']} ms p95 {single['p95_ms']} ms "
        f"({single['sentences_per_s']}/s, {single_cpu_ms:.1f} CPU ms each); "
        f"batch {batch['sentences_per_s']} sentences/s ({batch_cpu_ms:.1f} CPU ms each)"
    )
    return anchors, np.arange(len(sents)) % a.clusters
