#!/usr/bin/env python3
"""Import and export of a large agent file against a real `memvm serve` (issue 13's size target).

Writes a Letta-format file of N messages (every third turn a tool call with its return) and M
blocks, starts `memvm serve` on a fresh embedded data dir, and measures:
- the import (POST /v1/agents/import): wall time, and the server's RSS before, at its peak (sampled
  every 20 ms) and after, next to the file size;
- the export of the imported agent (GET /v1/agents/{id}/export) and the re-import of that export.
The embedding worker is off (MEMVM_EMBEDDING_WORKER=false), so the RSS figures are the import's own:
the imported history waits for its vectors until a server with the worker runs.

    python3 bench/agentfile_import.py [--messages 10000] [--blocks 50] [--out-json results/x.json]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.support.agentfiles import Shape, dumps  # noqa: E402  (the tests' generator: one source of shapes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000, help="about this many messages")
    parser.add_argument("--blocks", type=int, default=50)
    parser.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 9293)))
    parser.add_argument("--out-json", type=Path)
    args = parser.parse_args()

    turns = args.messages * 3 // 7  # 7 messages every 3 turns (2 + 2 + 3 with the tool call)
    blocks = [(f"block_{i}", f"value of block {i}. " * 20, 5000) for i in range(args.blocks)]
    content = dumps(Shape(blocks=blocks, turns=turns, window=200))
    work = Path(tempfile.mkdtemp(prefix="memvm-bench-af-"))
    (work / "agent.af").write_bytes(content)
    server = serve_fresh(work, args.port)
    try:
        results = _measure(f"http://127.0.0.1:{args.port}", psutil.Process(server.pid), work / "agent.af")
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    results |= {"messages_in_file": content.count(b'"type": "message"'), "blocks": args.blocks}
    print(json.dumps(results, indent=2))
    if args.out_json:
        args.out_json.write_text(json.dumps(results, indent=2))


def serve_fresh(work: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "MEMVM_DATA_DIR": str(work / "data"),
        "MEMVM_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "MEMVM_EMBEDDING_WORKER": "false",
    }
    memvm = shutil.which("memvm") or str(Path(sys.executable).parent / "memvm")
    command = [memvm, "serve", "--host", "127.0.0.1", "--port", str(port)]
    with open(work / "serve.log", "wb") as log:  # the server keeps its own copy of the descriptor
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health/", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"memvm serve did not start; see {work / 'serve.log'}")


def _measure(base: str, process: psutil.Process, path: Path) -> dict[str, float]:
    peak = [0.0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], process.memory_info().rss / 2**20)
            time.sleep(0.02)

    with httpx.Client(base_url=base, timeout=600) as client:
        before = process.memory_info().rss / 2**20
        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.perf_counter()
        with open(path, "rb") as handle:
            response = client.post("/v1/agents/import", files={"file": ("agent.af", handle, "application/json")})
        import_seconds = time.perf_counter() - started
        sampling.set()
        sampler.join()
        response.raise_for_status()
        after = process.memory_info().rss / 2**20
        agent_id = response.json()["agent_ids"][0]
        started = time.perf_counter()
        exported = client.get(f"/v1/agents/{agent_id}/export")
        export_seconds = time.perf_counter() - started
        started = time.perf_counter()
        again = client.post("/v1/agents/import", files={"file": ("again.af", exported.content, "application/json")})
        reimport_seconds = time.perf_counter() - started
        again.raise_for_status()
    return {
        "file_mib": round(path.stat().st_size / 2**20, 2),
        "import_seconds": round(import_seconds, 2),
        "rss_before_mib": round(before, 1),
        "rss_peak_during_import_mib": round(peak[0], 1),
        "rss_after_import_mib": round(after, 1),
        "export_seconds": round(export_seconds, 2),
        "export_mib": round(len(exported.content) / 2**20, 2),
        "reimport_of_export_seconds": round(reimport_seconds, 2),
    }


if __name__ == "__main__":
    main()
