"""The command line: `python3 -m bench.eval` against a running memvm whose database it may read."""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from .data import load_dir
from .evaluate import KS, Evaluation, evaluate
from .ingest import PENDING_MESSAGES_SQL, PendingCount
from .methods import METHODS
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


async def server_facts(client: httpx.AsyncClient, evaluation: Evaluation) -> dict[str, Any]:
    """memvm's version, and the embedding model its passages were embedded with (an agent without an
    `embedding` uses the server's default)."""
    version = (await client.get("/v1/health/")).json().get("version")
    first = next(iter(evaluation.conversations.values()), None)
    passages = (await client.get(f"/v1/agents/{first['agent_id']}/archival-memory", params={"limit": 1})).json() if first else []
    model = passages[0]["embedding_config"].get("embedding_model") if passages else None
    return {"memvm_version": version, "embedding_model": model}


def build_report(evaluation: Evaluation, data_dir: Path, facts: dict[str, Any], seconds: float) -> dict[str, Any]:
    files = [{"file": c["file"], "sha256": c["sha256"]} for c in evaluation.conversations.values()]
    return {
        "metadata": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "data_dir": str(data_dir),
            "files": files,
            "wall_seconds": round(seconds, 1),
            **facts,
        },
        "methods": {m: METHODS[m][0] for m in evaluation.methods},
        "ks": list(evaluation.ks),
        "conversations": evaluation.conversations,
        "groups": evaluation.groups(),
    }


async def run(args: argparse.Namespace) -> list[Path]:
    only = [QUICK_CONVERSATION] if args.quick else [s for s in args.only.split(",") if s]
    conversations = load_dir(args.data, only)
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    start = time.perf_counter()
    connection = await connect(args.memvm_data_dir)
    try:
        async with httpx.AsyncClient(base_url=args.base_url, timeout=120) as client:
            evaluation = await evaluate(
                client,
                conversations,
                pending_of(connection),
                methods=methods,
                ks=[int(k) for k in args.ks.split(",")],
                embed_timeout=args.embed_timeout,
            )
            facts = await server_facts(client, evaluation) | {"base_url": args.base_url}
    finally:
        await connection.close()
    return write(build_report(evaluation, args.data, facts, time.perf_counter() - start), args.out)


def main(argv: list[str] | None = None) -> int:
    for path in asyncio.run(run(arguments(argv))):
        print(f"wrote {path}")
    return 0
