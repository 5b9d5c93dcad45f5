#!/usr/bin/env python3
"""Where one request's server CPU goes, by process and by layer (issue 30's "show the profile").

Starts the instant fake LLM and `memvm serve` on a throwaway data dir (embedded PostgreSQL), runs one
op `--count` times at concurrency 1 after `--warmup` runs, and prints p50/p95 and the CPU per op of
each memvm process (from /proc, PostgreSQL excluded). With `--profile` (needs `py-spy` on PATH:
`pip install py-spy`; not a memvm dependency) it samples the busy HTTP process meanwhile and splits
its CPU by layer: model calls (openai SDK and its HTTP client), database (SQLAlchemy and asyncpg,
split further), memvm's own code, and HTTP serving (uvicorn/uvloop, Starlette, FastAPI, pydantic).

    BENCH_SHARED_DIR=../shared/bench python3 -m bench.cpu_layers --op turn --count 60 --profile
Ops: turn (a message that makes 2 model calls and 1 memory-tool call), get_agent, create_agent,
insert_passage (the agents embed through the fake's 1536-d /v1/embeddings, as the side-by-side's do),
search_passages (archival search, hybrid, top_k 10, in an archive of 200 passages inserted first).
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
from bench.scale_cluster import Fail, process_table, wait_healthy
from bench.scale_sim import agent_body

SRC = Path(__file__).resolve().parent.parent / "src"
SEARCHED_PASSAGES = 200  # the side-by-side's smaller archive: the exact ranking, no index walk
OPS = ["turn", "get_agent", "create_agent", "insert_passage", "search_passages"]
WORDS = ("quick", "brown", "lazy", "river", "garden", "winter", "music")


def memvm_processes(root: int) -> dict[int, tuple[str, float]]:
    """pid -> (name, CPU seconds) for `root` and its descendants, PostgreSQL's processes left out."""
    table = process_table()
    tree, stack = {}, [root]
    while stack:
        pid = stack.pop()
        stack.extend(child for child, (parent, _) in table.items() if parent == pid)
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if pid in table and not name.startswith("postgres"):
            tree[pid] = (name, table[pid][1])
    return tree


# A sample's layer: the first rule that matches its stack (root first, leaf last).
MODEL_CALLS = ("OpenAIChatModel.complete", "OpenAIEmbedder")
DATABASE = ("(sqlalchemy/", "(asyncpg/", "_PooledWatch")
LAYERS: list[tuple[str, Callable[[list[str]], bool]]] = [
    ("model calls: openai SDK and its HTTP client", lambda s: any(f.startswith(MODEL_CALLS) for f in s)),
    ("database: SQLAlchemy and asyncpg", lambda s: any(part in f for f in s for part in DATABASE)),
    ("JSON (stdlib)", lambda s: "(json/" in s[-1]),
    ("memvm's own code", lambda s: "(memvm/" in s[-1]),
    ("HTTP serving: uvicorn/uvloop, Starlette, FastAPI, pydantic", lambda s: True),
]


def database_part(stack: list[str]) -> str:
    leaf = stack[-1]
    if "(asyncpg/" in leaf or "_PooledWatch" in leaf:
        return "asyncpg protocol (encoding parameters, decoding rows)"
    if "(json/" in leaf or any("_jsonb_decoder" in f for f in stack[-4:]):
        return "JSONB values"
    if "(sqlalchemy/" not in leaf:
        return "memvm's code between statements"
    if any("Session._flush" in f for f in stack):
        return "SQLAlchemy: the unit of work's flush"
    if any("compiler.py" in f or "cache_key" in f for f in stack):
        return "SQLAlchemy: compiling, cache keys"
    if any("loading.py" in f or "engine/result.py" in f for f in stack):
        return "SQLAlchemy: rows into objects"
    return "SQLAlchemy: executing, sessions, events"


def layers(profile: Path) -> tuple[Counter[str], Counter[str]]:
    """Samples by layer, and the database layer's samples by part, from py-spy's raw output."""
    by_layer: Counter[str] = Counter()
    by_part: Counter[str] = Counter()
    for line in profile.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        stack = frames.split(";")
        if stack[0].startswith("Thread._bootstrap") and len(stack) <= 6:
            continue  # a pool thread waiting in native code: py-spy cannot tell it is idle
        layer = next(name for name, matches in LAYERS if matches(stack))
        by_layer[layer] += int(count)
        if layer.startswith("database"):
            by_part[database_part(stack)] += int(count)
    return by_layer, by_part


def op_request(op: str, client: httpx.Client, llm_url: str) -> Callable[[int], httpx.Response]:
    agent_id = client.post("/v1/agents/", json=agent_body("cpu-layers", llm_url)).raise_for_status().json()["id"]
    requests: dict[str, Callable[[int], httpx.Response]] = {
        "turn": lambda i: client.post(
            f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": f"message {i}: remember blue"}]}
        ),
        "get_agent": lambda i: client.get(f"/v1/agents/{agent_id}"),
        "create_agent": lambda i: client.post("/v1/agents/", json=agent_body(f"cpu-layers-{i}", llm_url)),
        "insert_passage": lambda i: client.post(
            f"/v1/agents/{agent_id}/archival-memory", json={"text": f"Passage {i}: the quick brown fox jumps over the lazy dog"}
        ),
        "search_passages": lambda i: client.get(
            f"/v1/agents/{agent_id}/archival-memory/search", params={"query": f"{WORDS[i % 7]} fox {i}", "top_k": 10}
        ),
    }
    if op == "search_passages":
        for i in range(SEARCHED_PASSAGES):
            text = f"Passage {i}: the {WORDS[i % 7]} fox jumps over the lazy dog {WORDS[(i * 3) % 7]}"
            client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": text}).raise_for_status()
    return requests[op]


def start_profilers(tree: dict[int, tuple[str, float]], out: Path, rate: int) -> list[tuple[Path, subprocess.Popen[bytes]]]:
    profilers = []
    for pid, (name, _) in tree.items():
        if name == "memvm-http":
            path = out / f"http-{pid}.txt"
            command = ["py-spy", "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "-o", str(path)]
            profilers.append((path, subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    time.sleep(1)  # attached
    return profilers


def report(args: argparse.Namespace, latencies: list[float], used: dict[int, tuple[str, float]], profiles: list[Path]) -> None:
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
    print(f"{args.op} x {args.count} at c=1: p50 {statistics.median(latencies) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")
    print("server CPU per op (PostgreSQL excluded):")
    for pid, (name, seconds) in sorted(used.items(), key=lambda item: -item[1][1]):
        print(f"  {seconds * 1000 / args.count:6.2f} ms  {name} ({pid})")
    busiest = max(used.items(), key=lambda item: item[1][1])
    profile = next((path for path in profiles if path.name == f"http-{busiest[0]}.txt"), None)
    if profile is None or not profile.exists():
        return
    per_op_ms = busiest[1][1] * 1000 / args.count
    by_layer, by_part = layers(profile)
    total = sum(by_layer.values())
    print(f"the busiest HTTP process's {per_op_ms:.1f} ms by layer ({total} samples):")
    for name, _ in LAYERS:
        print(f"  {by_layer[name] / total * per_op_ms:6.1f} ms  {100 * by_layer[name] / total:4.1f} %  {name}")
    for part, count in by_part.most_common():
        print(f"      {count / total * per_op_ms:6.1f} ms  {part}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", choices=OPS, default="turn")
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="sample the HTTP processes with py-spy (blocking, --rate)")
    parser.add_argument("--rate", type=int, default=400, help="py-spy samples per second")
    parser.add_argument("--port", type=int, default=18384)
    parser.add_argument("--llm-port", type=int, default=18399)
    args = parser.parse_args()
    if args.profile and shutil.which("py-spy") is None:
        sys.exit("cpu_layers: --profile needs py-spy on PATH (pip install py-spy)")
    shared = Path(os.environ.get("BENCH_SHARED_DIR", SRC.parent.parent / "shared" / "bench"))
    work = Path(tempfile.mkdtemp(prefix="memvm-cpu-layers-"))
    work.chmod(0o755)  # as root, the embedded PostgreSQL runs as a user of its own, who must reach data/
    llm_url = f"http://127.0.0.1:{args.llm_port}/v1"
    fake_command = [sys.executable, str(shared / "fake_llm.py"), "--port", str(args.llm_port), "--dim", "1536"]
    fake = subprocess.Popen(fake_command, stdout=(work / "fake.log").open("w"), stderr=subprocess.STDOUT)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMVM_") and k != "PYTHONDONTWRITEBYTECODE"}
    environment.update(PYTHONPATH=str(SRC), MEMVM_DATA_DIR=str(work / "data"))
    environment.update(MEMVM_OPENAI_BASE_URL=llm_url, MEMVM_OPENAI_API_KEY="x")
    command = [sys.executable, "-m", "memvm.cli", "serve", "--host", "127.0.0.1", "--port", str(args.port)]
    server = subprocess.Popen(command, env=environment, stdout=(work / "serve.log").open("w"), stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{args.llm_port}/health", fake, work / "fake.log", 30, "the fake LLM")
        wait_healthy(f"http://127.0.0.1:{args.port}/v1/health/", server, work / "serve.log", 60, "memvm serve")
        with httpx.Client(base_url=f"http://127.0.0.1:{args.port}", timeout=60) as client:
            request = op_request(args.op, client, llm_url)
            for i in range(args.warmup):
                request(i).raise_for_status()
            time.sleep(2)  # the embedding worker's share of the warm-up
            before = memvm_processes(server.pid)
            profilers = start_profilers(before, work, args.rate) if args.profile else []
            latencies = []
            for i in range(args.count):
                started = time.perf_counter()
                request(args.warmup + i).raise_for_status()
                latencies.append(time.perf_counter() - started)
            time.sleep(2)  # the worker embeds the last messages
            for _, profiler in profilers:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(60)
            after = memvm_processes(server.pid)
        used = {pid: (name, seconds - before.get(pid, (name, 0.0))[1]) for pid, (name, seconds) in after.items()}
        report(args, latencies, used, [path for path, _ in profilers])
    except Fail as failure:
        print(f"cpu_layers: {failure}", file=sys.stderr)
        return 1
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        fake.terminate()
        fake.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
