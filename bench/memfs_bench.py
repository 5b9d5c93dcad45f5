#!/usr/bin/env python3
"""MemFS over git smart HTTP, timed with Debian's git against a running `memvm serve`
(issue 26's target: clone, fetch and push each under 100 ms for an agent with 20 blocks and 500
versions). Times are wall-clock per git command, git's own start-up included.

    python3 bench/memfs_bench.py --base-url http://127.0.0.1:8283 [--versions 500] [--repeat 5]

It creates an agent with 20 blocks, PATCHes them round-robin until `--versions` versions exist, then
times: the first clone (which writes the branch: one commit per version), a second clone, a fetch
with nothing new, a fetch after one REST edit, and a push of one edited file. Writes an agent: use a
throwaway data dir."""

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

BLOCKS = 20


def git(*args: str, cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "user.name=bench", "-c", "user.email=bench@memvm", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )
    return (time.perf_counter() - started) * 1000


def make_agent(http: httpx.Client, versions: int) -> tuple[str, list[str]]:
    blocks = [{"label": f"topic{i:02d}", "value": "v0", "limit": 5000} for i in range(BLOCKS)]
    agent = http.post("/v1/agents/", json={"name": "memfs-bench", "memory_blocks": blocks}).raise_for_status().json()
    ids = [b["id"] for b in http.get(f"/v1/agents/{agent['id']}/core-memory/blocks").raise_for_status().json()]
    for n in range(BLOCKS, versions):
        http.patch(f"/v1/blocks/{ids[n % BLOCKS]}", json={"value": f"v{n}"}).raise_for_status()
    return agent["id"], ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--versions", type=int, default=500, help="block versions in all (at least 20)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with httpx.Client(base_url=args.base_url, timeout=600) as http, tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        agent_id, block_ids = make_agent(http, args.versions)
        print(f"agent with {BLOCKS} blocks and {args.versions} versions made in {time.perf_counter() - started:.1f} s")
        url = f"{args.base_url}/v1/git/{agent_id}/state.git"
        root = Path(scratch)
        rows = {"first clone (writes the branch)": [git("clone", "-q", url, "c0", cwd=root)]}
        rows["clone"] = [git("clone", "-q", url, f"c{i + 1}", cwd=root) for i in range(args.repeat)]
        checkout = root / "c1"
        rows["fetch, nothing new"] = [git("fetch", "-q", cwd=checkout) for _ in range(args.repeat)]
        rows["fetch after one REST edit"] = []
        rows["push of one edited file"] = []
        for i in range(args.repeat):
            http.patch(f"/v1/blocks/{block_ids[0]}", json={"value": f"rest {i}"}).raise_for_status()
            rows["fetch after one REST edit"].append(git("pull", "-q", "--ff-only", cwd=checkout))
            path = checkout / "system" / "topic01.md"
            path.write_text(path.read_text() + f"\npushed {i}")
            git("commit", "-qam", f"edit {i}", cwd=checkout)
            rows["push of one edited file"].append(git("push", "-q", "origin", "main", cwd=checkout))
    print(f"\n| git command ({BLOCKS} blocks, {args.versions} versions) | median ms | max ms |")
    print("|---|---:|---:|")
    for name, times in rows.items():
        print(f"| {name} | {statistics.median(times):.0f} | {max(times):.0f} |")


if __name__ == "__main__":
    main()
