#!/usr/bin/env python3
"""Where one PostgreSQL saturates: many organizations × agents, turns through R replicas (issue 30).

One PostgreSQL (the embedded server the first `memvm serve` starts), R `memvm serve` replicas on it
(own ports, MEMVM_WORKERS=1 each, MEMVM_DATABASE_URL for all but the first; only the first runs the
embedding worker), the instant fake LLM, O organizations with a key each and A agents per
organization. Clients send turns (POST /v1/agents/{id}/messages: two model calls and one memory tool,
as bench/run.sh's send_message) spread over the replicas and organizations, never two at once to one
agent, at each concurrency of --concurrency for each replica count of --replicas (replicas are added
between steps). Per step: turns/s, latency, DB connections, WAL, transactions and the CPU of
PostgreSQL, memvm, the fake LLM and this driver (from /proc), then what a dedicated database host
would carry at the measured per-turn cost.

    bench/run.sh scale [--quick]            # the same, results under bench/results/
    python3 -m bench.scale_sim --quick --out-dir bench/results   # from the repository root
Everything listens on free loopback ports; every process started here is stopped at the end and the
data dir is deleted (--keep keeps it)."""

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from bench.scale_cluster import Cluster, Fail, free_ports, machine_busy_seconds, process_table, tree_cpu
from bench.scale_report import fmt, render_markdown, summarize

REPO = Path(__file__).resolve().parent.parent
TURN_PATH = "/v1/agents/{}/messages"


# ---------------------------------------------------------------- database counters
STATS_SQL = """
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS wal,
       pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid,
       (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()) AS xacts,
       pg_database_size(current_database()) AS db_bytes
"""
SETTINGS_SQL = """
SELECT name, setting FROM pg_settings WHERE name IN
  ('max_connections', 'superuser_reserved_connections', 'shared_buffers', 'synchronous_commit', 'server_version',
   'fsync', 'full_page_writes', 'checkpoint_timeout', 'max_wal_size', 'wal_level')
"""
CONNECTIONS_SQL = """
SELECT count(*) AS total, count(*) FILTER (WHERE state = 'active') AS active,
       count(*) FILTER (WHERE state = 'idle in transaction') AS in_transaction
FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
"""


async def snapshot(db: asyncpg.Connection, cluster: Cluster, postmaster: int) -> dict[str, float]:
    row = dict(await db.fetchrow(STATS_SQL))
    table = process_table()
    own = os.times()
    row |= {
        "t": time.monotonic(),
        "cpu_pg": tree_cpu(table, [postmaster], set()),
        "cpu_memvm": tree_cpu(table, [p.pid for _, p in cluster.replicas], {postmaster}),
        "cpu_llm": tree_cpu(table, [cluster.llm.pid], set()) if cluster.llm else 0.0,
        "cpu_driver": own.user + own.system,
        "cpu_machine": machine_busy_seconds(),
    }
    return row


async def sample_connections(db: asyncpg.Connection, until: float, samples: list[tuple[int, int, int]]) -> None:
    while time.monotonic() < until:
        row = await db.fetchrow(CONNECTIONS_SQL)
        samples.append((row["total"], row["active"], row["in_transaction"]))
        await asyncio.sleep(0.5)


# ---------------------------------------------------------------- setup and load
def agent_body(name: str, llm_url: str) -> dict[str, Any]:
    return {
        "name": name,
        "memory_blocks": [
            {"label": "persona", "value": "I am a helpful benchmark agent. I keep answers short.", "limit": 20000},
            {"label": "human", "value": "The human is a load generator named Bench.", "limit": 20000},
        ],
        "llm_config": {"model": "fake-gpt", "model_endpoint_type": "openai", "model_endpoint": llm_url, "context_window": 128000},
        "embedding_config": {
            "embedding_endpoint_type": "openai",
            "embedding_endpoint": llm_url,
            "embedding_model": "text-embedding-3-small",
            "embedding_dim": 1536,
            "embedding_chunk_size": 300,
        },
    }


async def create_tenants(base_url: str, cluster: Cluster, orgs: int, per_org: int) -> list[tuple[str, str]]:
    """O organizations with a key each (the admin API) and A agents each: [(org key, agent id)]."""
    admin = {"Authorization": f"Bearer {cluster.admin_key}"}
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        keys = []
        for o in range(orgs):
            r = await http.post("/v1/admin/api-keys", headers=admin, json={"organization": f"scale-{o:03d}", "name": "scale-sim"})
            if r.status_code != 200:
                raise Fail(f"POST /v1/admin/api-keys answered {r.status_code}: {r.text[:200]}")
            keys.append(r.json()["key"])

        async def create(key: str, name: str) -> tuple[str, str]:
            r = await http.post("/v1/agents/", headers={"Authorization": f"Bearer {key}"}, json=agent_body(name, cluster.llm_url))
            if r.status_code != 200:
                raise Fail(f"POST /v1/agents/ answered {r.status_code}: {r.text[:200]}")
            return key, r.json()["id"]

        agents = []
        for o, key in enumerate(keys):  # one organization at a time, its agents at once
            agents += await asyncio.gather(*(create(key, f"scale-{o:03d}-{a:03d}") for a in range(per_org)))
    # interleaved by organization: any client's share of the agents spans organizations
    return [agents[o * per_org + a] for a in range(per_org) for o in range(orgs)]


@dataclass
class StepLoad:
    """What the clients of one step saw inside the measured window."""

    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


async def client_loop(
    n: int, mine: list[tuple[str, str]], https: list[httpx.AsyncClient], window: tuple[float, float], load: StepLoad
) -> None:
    start, stop = window
    i = 0
    while time.monotonic() < stop:
        key, agent_id = mine[i % len(mine)]
        http = https[(n + i) % len(https)]  # each client walks the replicas, so every agent is served by all
        text = f"Hello {n}-{i}, please remember that my favourite word is tea."
        t0 = time.monotonic()
        try:
            r = await http.post(
                TURN_PATH.format(agent_id),
                headers={"Authorization": f"Bearer {key}"},
                json={"messages": [{"role": "user", "content": text}]},
            )
            outcome = "ok" if r.status_code == 200 else f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            outcome = type(e).__name__
        t1 = time.monotonic()
        if start <= t1 <= stop:  # completed inside the window: the window's throughput, however long it waited
            if outcome == "ok":
                load.latencies.append(t1 - t0)
            else:
                load.errors[outcome] = load.errors.get(outcome, 0) + 1
        i += 1


async def run_step(
    cluster: Cluster,
    db: asyncpg.Connection,
    urls: list[str],
    agents: list[tuple[str, str]],
    concurrency: int,
    warmup: float,
    seconds: float,
) -> dict[str, Any]:
    postmaster = cluster.postmaster_pid()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    https = [httpx.AsyncClient(base_url=u, timeout=120, limits=limits) for u in urls]
    start = time.monotonic() + warmup
    stop = start + seconds
    load = StepLoad()
    clients = [
        asyncio.create_task(client_loop(n, agents[n::concurrency], https, (start, stop), load)) for n in range(concurrency)
    ]
    await asyncio.sleep(warmup)
    before = await snapshot(db, cluster, postmaster)
    connections: list[tuple[int, int, int]] = []
    await sample_connections(db, stop, connections)
    after = await snapshot(db, cluster, postmaster)
    await asyncio.gather(*clients)
    for http in https:
        await http.aclose()
    return {
        "replicas": len(urls),
        "concurrency": concurrency,
        "latencies_ms": [round(x * 1000, 2) for x in load.latencies],
        "errors": load.errors,
        "before": before,
        "after": after,
        "connections": connections,
        "loadavg": os.getloadavg(),
    }


# ---------------------------------------------------------------- main
def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="replicas 1,2; 8 organizations × 8 agents; 8 s steps")
    p.add_argument("--replicas", default="1,2,4", help="replica counts, ascending (default 1,2,4)")
    p.add_argument("--concurrency", default="4,16,64", help="concurrent clients per step (default 4,16,64)")
    p.add_argument("--orgs", type=int, default=16, help="organizations, one API key each (default 16)")
    p.add_argument("--agents", type=int, default=8, help="agents per organization (default 8)")
    p.add_argument("--step-seconds", type=float, default=25.0, help="measured seconds per step (default 25)")
    p.add_argument("--warmup", type=float, default=4.0, help="unmeasured seconds before each step (default 4)")
    p.add_argument("--db-pool-size", type=int, help="MEMVM_DB_POOL_SIZE of every replica (default: memvm's, 20)")
    p.add_argument("--db-max-overflow", type=int, help="MEMVM_DB_MAX_OVERFLOW of every replica (default: memvm's, 20)")
    p.add_argument(
        "--db-turn-lock-pool-size", type=int, help="MEMVM_DB_TURN_LOCK_POOL_SIZE of every replica (default: memvm's, 20)"
    )
    p.add_argument("--shared-dir", type=Path, default=Path(os.environ.get("BENCH_SHARED_DIR", REPO.parent / "shared" / "bench")))
    p.add_argument("--memvm-bin", default=os.environ.get("MEMVM_BIN") or shutil.which("memvm") or "")
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--keep", action="store_true", help="keep the temporary data dir and logs")
    args = p.parse_args(argv)
    if args.quick:
        args.replicas, args.orgs, args.agents, args.step_seconds, args.warmup = "1,2", 8, 8, 8.0, 2.0
    args.replica_steps = sorted({int(x) for x in args.replicas.split(",")})
    args.concurrency_steps = [int(x) for x in args.concurrency.split(",")]
    return args


def check_prerequisites(args: argparse.Namespace) -> Path:
    fake_llm = Path(args.shared_dir) / "fake_llm.py"
    if not fake_llm.is_file():
        raise Fail(f"no fake_llm.py in {args.shared_dir} (set BENCH_SHARED_DIR or --shared-dir)")
    if not args.memvm_bin or not os.access(args.memvm_bin, os.X_OK):
        raise Fail("memvm is not installed (pip install -e '.[test]'), or set MEMVM_BIN / --memvm-bin")
    if max(args.concurrency_steps) > args.orgs * args.agents:
        raise Fail(f"--concurrency {max(args.concurrency_steps)} needs at least as many agents ({args.orgs} × {args.agents})")
    if "MEMVM_DATABASE_URL" in os.environ:
        print("scale_sim: ignoring MEMVM_DATABASE_URL: the first replica starts its own embedded PostgreSQL", file=sys.stderr)
    return fake_llm


async def simulate(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    ports = free_ports(1 + max(args.replica_steps))
    cluster.start_llm(ports[0])
    urls = [cluster.start_replica(ports[1])]
    print(f"memvm up on {urls[0]} with its embedded PostgreSQL ({cluster.socket_dir}); fake LLM {cluster.llm_url}", flush=True)
    agents = await create_tenants(urls[0], cluster, args.orgs, args.agents)
    print(f"{args.orgs} organizations × {args.agents} agents created", flush=True)
    db = await asyncpg.connect(host=str(cluster.socket_dir), user="postgres", database="postgres")
    settings = {r["name"]: r["setting"] for r in await db.fetch(SETTINGS_SQL)}
    steps = []
    try:
        for replicas in args.replica_steps:
            while len(urls) < replicas:
                urls.append(cluster.start_replica(ports[1 + len(urls)]))
            for concurrency in args.concurrency_steps:
                step = await run_step(cluster, db, urls, agents, concurrency, args.warmup, args.step_seconds)
                steps.append(step)
                row = summarize([step], os.cpu_count() or 1)[0]
                print(
                    f"R={replicas} c={concurrency}: {row['turns_per_s']:.1f} turns/s, p50 {fmt(row['p50_ms'], 0)} ms, "
                    f"{row['conn_max']} connections, load {row['loadavg']}",
                    flush=True,
                )
    finally:
        await db.close()
    return {"settings": settings, "steps": steps}


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        fake_llm = check_prerequisites(args)
    except Fail as e:
        print(f"scale_sim: {e}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="memvm-scale."))
    work.chmod(0o755)  # the embedded PostgreSQL may run as its own system user (as root)
    pools = {
        "MEMVM_DB_POOL_SIZE": args.db_pool_size,
        "MEMVM_DB_MAX_OVERFLOW": args.db_max_overflow,
        "MEMVM_DB_TURN_LOCK_POOL_SIZE": args.db_turn_lock_pool_size,
    }
    cluster = Cluster(work, args.memvm_bin, fake_llm, REPO / "src", {k: str(v) for k, v in pools.items() if v is not None})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%MZ")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    base = args.out_dir / f"{stamp}-memvm-scale{'-quick' if args.quick else ''}"
    started = {"utc": datetime.now(UTC).isoformat(timespec="seconds"), "loadavg": os.getloadavg()}
    try:
        result = asyncio.run(simulate(args, cluster))
    except Fail as e:
        print(f"scale_sim: {e}", file=sys.stderr)
        return 2
    finally:
        cluster.stop()
        for log in work.glob("*.log"):  # the servers' and the fake LLM's, beside the results
            shutil.copy(log, f"{base}-{log.name}")
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report = {
        "command": "python3 -m bench.scale_sim " + " ".join(argv),
        "started": started,
        "finished": {"utc": datetime.now(UTC).isoformat(timespec="seconds"), "loadavg": os.getloadavg()},
        "cpus": os.cpu_count(),
        "memvm": {
            "src": str(REPO / "src"),
            "head": git("rev-parse", "--short", "HEAD"),
            "changed": git("status", "--short", "src"),
        },
        "config": {k: v for k, v in vars(args).items() if k not in ("shared_dir", "out_dir", "memvm_bin")},
        **result,
    }
    report["rows"] = summarize(result["steps"], os.cpu_count() or 1)
    base.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str))
    markdown = render_markdown(report)
    base.with_suffix(".md").write_text(markdown)
    print(markdown)
    print(f"results: {base}.json\n         {base}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
