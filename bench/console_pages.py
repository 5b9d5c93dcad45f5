#!/usr/bin/env python3
"""How fast the operator console's pages answer for a large agent (issue 16's target: the agent
page under 50 ms of server time with 20 blocks and 1,000 messages, history paginated).

Imports a Letta-format agent file with that shape into a fresh `memvm serve` (embedded database,
embedding worker off), signs in to the console (local mode), then requests each part of the agent
page in turn: the page itself and the parts it loads after it (timeline, context window, archival
memory, tools), a block's history and the prompt in the git view. Reports p50/p95 of the request
latency over loopback (server time plus well under a millisecond of client).

    python3 bench/console_pages.py [--messages 1000] [--blocks 20] [--requests 200] [--out-json results/x.json]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.agentfile_import import serve_fresh  # noqa: E402

from tests.support.agentfiles import Shape, dumps  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="about this many messages")
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200, help="per page")
    parser.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 9294)))
    parser.add_argument("--out-json", type=Path)
    args = parser.parse_args()

    turns = args.messages * 3 // 7  # the generator writes 7 messages every 3 turns
    blocks = [(f"block_{i}", f"value of block {i}. " * 20, 5000) for i in range(args.blocks)]
    work = Path(tempfile.mkdtemp(prefix="memvm-bench-console-"))
    (work / "agent.af").write_bytes(dumps(Shape(blocks=blocks, turns=turns, window=200)))
    server = serve_fresh(work, args.port)
    try:
        results = _measure(f"http://127.0.0.1:{args.port}", work / "agent.af", args.requests)
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    results["shape"] = {"messages": args.messages, "blocks": args.blocks, "requests_per_page": args.requests}
    print(json.dumps(results, indent=2))
    if args.out_json:
        args.out_json.write_text(json.dumps(results, indent=2))


def _measure(base: str, agent_file: Path, requests: int) -> dict:
    with httpx.Client(base_url=base, timeout=60) as client:
        with open(agent_file, "rb") as handle:
            imported = client.post("/v1/agents/import", files={"file": ("agent.af", handle, "application/json")})
        imported.raise_for_status()
        agent_id = imported.json()["agent_ids"][0]
        block_id = client.get(f"/v1/agents/{agent_id}/core-memory/blocks").json()[0]["id"]
        assert client.get("/ui/sign-in").status_code == 303  # local mode: sets the console cookie
        pages = {
            "agent page": f"/ui/agents/{agent_id}",
            "timeline (newest 50 messages)": f"/ui/agents/{agent_id}/timeline",
            "context window": f"/ui/agents/{agent_id}/context",
            "archival memory": f"/ui/agents/{agent_id}/archival",
            "tools": f"/ui/agents/{agent_id}/tools",
            "block history": f"/ui/agents/{agent_id}/blocks/{block_id}/history",
            "prompt, git view": f"/ui/agents/{agent_id}/prompt?mode=git",
            "agent list": "/ui/agents",
        }
        return {name: _timed(client, url, requests) for name, url in pages.items()}


def _timed(client: httpx.Client, url: str, requests: int) -> dict[str, float]:
    for _ in range(5):  # warm the server's caches and connections
        client.get(url).raise_for_status()
    latencies = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(url)
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    latencies.sort()
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 2),
        "bytes": len(response.content),
    }


if __name__ == "__main__":
    main()
