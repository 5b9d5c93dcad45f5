#!/usr/bin/env python3
"""Folders and files against a running `memvm serve` (issue 27's benchmark). Nothing asserts on time.

    python3 bench/files_bench.py --base-url http://127.0.0.1:8283 --database-url postgresql://...
        [--files 100] [--megabytes 50] [--search-chunks 10000] [--repeat 20]

1. Upload-to-searchable: `--files` text files (logs, Markdown, plain text; `--megabytes` in all) are
   uploaded into a new folder over HTTP; the clock runs from the first upload until every file is
   `completed` (parsed, chunked, every chunk embedded by the server's worker). Throughput in MB/s and
   chunks/s, and each file's upload answer time.
2. Tool latency: a second folder of about `--search-chunks` chunks is attached to an agent; then
   grep_files and semantic_search_files are timed as the agent's tool calls run them: memvm's own
   functions (memvm.files.search) in this process, on the server's database (`--database-url`, the
   URL `memvm serve` printed or MEMVM_DATABASE_URL), so the time is the tool's SQL and Python without a
   model round trip. The semantic search time includes embedding the query with the folder's model.
Writes folders, files and an agent: use a throwaway data dir. Needs memvm installed (pip install -e .)."""

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

VOCABULARY = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
    "romeo sierra tango uniform victor whiskey xray yankee zulu request response timeout retry cache shard "
    "replica leader follower commit rollback index vector query planner memory block archive folder window"
)
WORDS = VOCABULARY.split()
KINDS = (("log", "text/plain"), ("md", "text/markdown"), ("txt", "text/plain"))
GREP_PATTERNS = ("timeout", r"shard-\d+ (leader|follower)", "ERROR.*rollback", "no-such-token-anywhere")
QUERIES = ("replica fell behind the leader", "cache eviction under memory pressure", "vector index rebuild")


def document(n: int, size: int) -> bytes:
    """A deterministic file of about `size` bytes: log lines, or Markdown sections, or prose."""
    rng = random.Random(n)
    kind = KINDS[n % len(KINDS)][0]
    lines: list[str] = []
    total = 0
    while total < size:
        words = " ".join(rng.choices(WORDS, k=rng.randint(6, 18)))
        if kind == "log":
            level = rng.choice(("INFO", "INFO", "WARN", "ERROR"))
            line = f"2026-12-01T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {level} shard-{rng.randint(0, 31)} {words}"
        elif kind == "md":
            line = f"## {words[:40]}" if rng.random() < 0.1 else words.capitalize() + "."
        else:
            line = words
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Uploaded:
    folder_id: str
    answers_ms: list[float]
    parsed_s: float  # every file chunked: grep and full-text search see it all
    completed_s: float  # every chunk embedded too
    chunks: int


def upload_folder(http: httpx.Client, name: str, files: int, megabytes: float, embedding: str | None) -> Uploaded:
    """Upload into a new folder and wait until every file is processed."""
    body = {"name": name} | ({"embedding": embedding} if embedding else {})
    folder = http.post("/v1/folders/", json=body).raise_for_status().json()["id"]
    size = int(megabytes * 1_000_000 / files)
    bodies = [(f"{name}-{n:03d}.{KINDS[n % len(KINDS)][0]}", KINDS[n % len(KINDS)][1], document(n, size)) for n in range(files)]
    answers: list[float] = []
    started = time.perf_counter()
    for file_name, media_type, body in bodies:
        sent = time.perf_counter()
        http.post(f"/v1/folders/{folder}/upload", files={"file": (file_name, body, media_type)}).raise_for_status()
        answers.append((time.perf_counter() - sent) * 1000)
    parsed_s = None
    while True:
        listed = http.get(f"/v1/folders/{folder}/files", params={"limit": files + 1}).raise_for_status().json()
        statuses = {f["processing_status"] for f in listed}
        if "error" in statuses:
            raise SystemExit(f"files failed to process: {[f for f in listed if f['processing_status'] == 'error']}")
        if parsed_s is None and statuses <= {"embedding", "completed"}:
            parsed_s = time.perf_counter() - started
        if statuses == {"completed"}:
            chunks = sum(f["total_chunks"] for f in listed)
            return Uploaded(folder, answers, parsed_s or 0.0, time.perf_counter() - started, chunks)
        time.sleep(0.2)


async def time_tools(database_url: str, agent_id: str, embedding: str | None, repeat: int) -> dict[str, list[float]]:
    """grep_files and semantic_search_files as the agent's tool calls run them, in this process."""
    from memvm.actors import DEFAULT_ORGANIZATION_ID
    from memvm.config import Settings
    from memvm.db.engine import build_engine, build_sessionmaker
    from memvm.db.uow import transaction
    from memvm.embeddings.ports import EmbeddingModel
    from memvm.embeddings.registry import EmbedderRegistry
    from memvm.files import search

    settings = Settings(database_url=database_url)
    assert settings.database_url is not None
    engine = build_engine(settings.database_url, settings)
    sessionmaker = build_sessionmaker(engine)
    embedders = EmbedderRegistry.from_settings(settings)
    embedder = embedders.for_handle(embedding)
    model = EmbeddingModel.of(embedder)

    async def timed(call: Callable[[], Awaitable[object]]) -> float:
        started = time.perf_counter()
        await call()
        return (time.perf_counter() - started) * 1000

    async def grep(pattern: str) -> None:
        async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            await search.grep_files(session, agent_id, pattern, include=None, context_lines=1, offset=0)

    async def semantic(query: str) -> None:
        vector = (await embedder.embed([query]))[0]
        async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            await search.search_files(session, agent_id, {model: vector}, query, 5)

    rows: dict[str, list[float]] = {}
    try:
        for pattern in GREP_PATTERNS:
            await grep(pattern)  # warm
            rows[f"grep_files {pattern!r}"] = [await timed(lambda p=pattern: grep(p)) for _ in range(repeat)]
        for query in QUERIES:
            await semantic(query)
            rows[f"semantic_search_files {query!r}"] = [await timed(lambda q=query: semantic(q)) for _ in range(repeat)]
    finally:
        await embedders.aclose()
        await engine.dispose()
    return rows


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--database-url", required=True, help="the server's database, for the tool latency phase")
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--megabytes", type=float, default=50.0)
    parser.add_argument("--search-chunks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--embedding", help="the folders' embedding handle (default: the server's, local MiniLM)")
    args = parser.parse_args()
    stamp = int(time.time())
    with httpx.Client(base_url=args.base_url, timeout=600) as http:
        run = upload_folder(http, f"bench-{stamp}", args.files, args.megabytes, args.embedding)
        print(f"\n| upload to searchable ({args.files} files, {args.megabytes:g} MB, {run.chunks} chunks) | value |")
        print("|---|---:|")
        print(f"| upload answer p50 / max | {statistics.median(run.answers_ms):.0f} / {max(run.answers_ms):.0f} ms |")
        parsed = f"{run.parsed_s:.1f} s, {args.megabytes / run.parsed_s:.2f} MB/s"
        print(f"| all parsed and chunked (grep, full-text search) | {parsed} |")
        print(f"| all embedded (vector search) | {run.completed_s:.1f} s, {run.chunks / run.completed_s:.0f} chunks/s |")
        # ~900 characters a chunk (the default chunk size of 300 tokens, 3 characters a token).
        search_mb = args.search_chunks * 900 / 1_000_000
        searched = upload_folder(http, f"bench-search-{stamp}", 20, search_mb, args.embedding)
        agent = http.post("/v1/agents/", json={"name": f"files-bench-{stamp}"}).raise_for_status().json()["id"]
        http.patch(f"/v1/agents/{agent}/folders/attach/{searched.folder_id}").raise_for_status()
    rows = asyncio.run(time_tools(args.database_url, agent, args.embedding, args.repeat))
    print(f"\n| tool over {searched.chunks} chunks (in process, no model) | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for name, times in rows.items():
        print(f"| {name} | {statistics.median(times):.1f} | {percentile(times, 0.95):.1f} |")


if __name__ == "__main__":
    main()
