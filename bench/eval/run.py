"""The command line: `python3 -m bench.eval` against a running memvm whose database it may read, and
with `--letta-url` against a running Letta 0.16.8 too, which embeds through that memvm."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from .data import Conversation, load_dir
from .evaluate import KS, Evaluation, Server, evaluate
from .ingest import PENDING_MESSAGES_SQL, Analyze, PendingCount
from .letta import LETTA_METHODS, LETTA_NOTES, NOT_ON_LETTA, letta_facts, letta_settings
from .methods import METHODS
from .relay import closing_relay
from .report import write

QUICK_CONVERSATION = "30"
REPO = Path(__file__).resolve().parents[2]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python3 -m bench.eval", description=__doc__)
    ap.add_argument("--base-url", default="http://127.0.0.1:9283")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "locomo", help="a directory of LoCoMo *.json")
    ap.add_argument("--only", default="", help="comma list of file stems (default: every file)")
    ap.add_argument("--quick", action="store_true", help=f"only {QUICK_CONVERSATION}.json")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "eval")
    ap.add_argument("--memvm-data-dir", type=Path, required=True, help="the server's MEMVM_DATA_DIR (its embedded PostgreSQL)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma list of " + ", ".join(METHODS))
    ap.add_argument("--ks", default=",".join(map(str, KS)))
    ap.add_argument("--embed-timeout", type=float, default=1800.0, help="seconds to wait for the embedding worker")
    ap.add_argument("--letta-url", default="", help="also put the conversations into the Letta 0.16.8 server there and ask it")
    ap.add_argument(
        "--letta-llm-url", default="http://127.0.0.1:8399/v1", help="the OpenAI-compatible LLM Letta's agents name (never called)"
    )
    return ap.parse_args(argv)


async def connect(data_dir: Path) -> asyncpg.Connection:
    """The embedded postmaster's socket and port, from its postmaster.pid."""
    lines = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()
    socket_dir = lines[4].strip() if len(lines) > 4 and lines[4].strip() else str(data_dir / "pg")
    return await asyncpg.connect(host=socket_dir, port=int(lines[3]), user="postgres", database="postgres")


def pending_of(connection: asyncpg.Connection) -> PendingCount:
    async def pending() -> int:
        return int(await connection.fetchval(PENDING_MESSAGES_SQL))

    return pending


def analyze_of(connection: asyncpg.Connection) -> Analyze:
    """ANALYZE of the tables the harness fills, right after a conversation went in. Without it the
    questions are planned on statistics older than the import until autovacuum's next round (up to a
    minute): conversation_search then took 45 ms p50 instead of 17.6 (bench/README.md)."""

    async def analyze() -> None:
        await connection.execute("ANALYZE message, passage")

    return analyze


async def server_facts(client: httpx.AsyncClient, evaluation: Evaluation) -> dict[str, Any]:
    """memvm's version, and the embedding model its passages were embedded with (an agent without an
    `embedding` uses the server's default)."""
    version = (await client.get("/v1/health/")).json().get("version")
    first = next(iter(evaluation.conversations.values()), None)
    passages = (await client.get(f"/v1/agents/{first['agent_id']}/archival-memory", params={"limit": 1})).json() if first else []
    model = passages[0]["embedding_config"].get("embedding_model") if passages else None
    return {"memvm_version": version, "embedding_model": model}


def server_section(evaluation: Evaluation) -> dict[str, Any]:
    """What the report holds for one server: its methods, each conversation, and the groups."""
    return {
        "methods": {m: METHODS[m][0] for m in evaluation.methods},
        "conversations": evaluation.conversations,
        "groups": evaluation.groups(),
    }


def build_report(evaluation: Evaluation, data_dir: Path, facts: dict[str, Any], seconds: float) -> dict[str, Any]:
    """memvm's results at the top level; `letta_report` adds Letta's under "letta"."""
    files = [{"file": c["file"], "sha256": c["sha256"]} for c in evaluation.conversations.values()]
    return {
        "metadata": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "data_dir": str(data_dir),
            "files": files,
            "wall_seconds": round(seconds, 1),
            **facts,
        },
        "ks": list(evaluation.ks),
        **server_section(evaluation),
    }


def letta_report(evaluation: Evaluation, facts: dict[str, Any], asked: Sequence[str]) -> dict[str, Any]:
    """Letta's section: its results, and why the methods it lacks have no column."""
    missing = {m: NOT_ON_LETTA[m] for m in asked if m not in evaluation.methods}
    return {"metadata": facts, **server_section(evaluation), "not_available": missing, "notes": list(LETTA_NOTES)}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def evaluate_letta(
    args: argparse.Namespace,
    memvm: httpx.AsyncClient,
    conversations: list[Conversation],
    methods: list[str],
    ks: list[int],
    save: Callable[[dict[str, Any]], None],
) -> None:
    """The same conversations and questions against Letta, with memvm's embedding model; Letta's part
    of the report is saved after each conversation (the run is long)."""
    start, load_before = time.perf_counter(), load_average()
    async with closing_relay(memvm) as relay, httpx.AsyncClient(base_url=args.letta_url, timeout=300) as client:
        settings = await letta_settings(memvm, args.letta_llm_url, relay)
        facts = await letta_facts(client, settings)
        facts["embedding_relay"] = f"{relay} -> {memvm.base_url} (closes each connection; bench/eval/relay.py)"

        def checkpoint(partial: Evaluation) -> None:
            now = {
                "wall_seconds": round(time.perf_counter() - start, 1),
                "load_average": [load_before, load_average()],
                "conversations_done": f"{len(partial.outcomes)} of {len(conversations)}",
            }
            save(letta_report(partial, facts | now, methods))

        letta_methods = [m for m in methods if m in LETTA_METHODS]
        await evaluate(client, conversations, Server("letta", settings), methods=letta_methods, ks=ks, done=checkpoint)


async def run(args: argparse.Namespace) -> list[Path]:
    only = [QUICK_CONVERSATION] if args.quick else [s for s in args.only.split(",") if s]
    conversations = load_dir(args.data, only)
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    ks = [int(k) for k in args.ks.split(",")]
    start, load_before = time.perf_counter(), load_average()
    connection = await connect(args.memvm_data_dir)
    written: list[Path] = []
    try:
        async with httpx.AsyncClient(base_url=args.base_url, timeout=120) as client:
            memvm = Server("memvm", pending=pending_of(connection), analyze=analyze_of(connection), warm_query_vectors=True)
            evaluation = await evaluate(client, conversations, memvm, methods=methods, ks=ks, embed_timeout=args.embed_timeout)
            facts = await server_facts(client, evaluation) | {"base_url": args.base_url}
            facts["load_average"] = [load_before, load_average()]
            report = build_report(evaluation, args.data, facts, time.perf_counter() - start)
            written = write(report, args.out)  # memvm's part is on disk before Letta's starts
            if args.letta_url:

                def save(letta: dict[str, Any]) -> None:
                    nonlocal written
                    written = write(report | {"letta": letta}, args.out)

                await evaluate_letta(args, client, conversations, methods, ks, save)
    finally:
        await connection.close()
    return written


def main(argv: list[str] | None = None) -> int:
    for path in asyncio.run(run(arguments(argv))):
        print(f"wrote {path}")
    return 0
