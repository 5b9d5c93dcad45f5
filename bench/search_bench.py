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

import sys

# Run as a file, this script's directory is on sys.path: the package next to it imports without installing.
from search.run import main

if __name__ == "__main__":
    sys.exit(main(__doc__))
