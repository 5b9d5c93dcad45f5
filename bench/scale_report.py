"""The numbers of bench/scale_sim.py's steps, what one database host would carry, and the Markdown report."""

import math
import statistics
from typing import Any

CPU_PARTS = ("pg", "memvm", "llm", "driver", "machine")
DB_HOST_CORES = (4, 8, 16, 32, 64)


def per_turn(value: float, turns: int, scale: float = 1.0) -> float | None:
    return value * scale / turns if turns else None


def percentile(sorted_values: list[float], share: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(share * len(sorted_values)))]


def summarize(steps: list[dict[str, Any]], cpus: int) -> list[dict[str, Any]]:
    """One row per step: rates over the measured window, costs per completed turn."""
    rows = []
    for step in steps:
        before, after = step["before"], step["after"]
        seconds = after["t"] - before["t"]
        latencies = sorted(step["latencies_ms"])
        turns = len(latencies)
        cpu = {part: after[f"cpu_{part}"] - before[f"cpu_{part}"] for part in CPU_PARTS}
        ours = cpu["pg"] + cpu["memvm"] + cpu["llm"] + cpu["driver"]
        connections = step["connections"] or [(0, 0, 0)]
        wal = after["wal"] - before["wal"]
        xacts = after["xacts"] - before["xacts"]
        write_xacts = after["next_xid"] - before["next_xid"]
        rows.append(
            {
                "replicas": step["replicas"],
                "concurrency": step["concurrency"],
                "seconds": round(seconds, 1),
                "turns": turns,
                "errors": sum(step["errors"].values()),
                "error_kinds": step["errors"],
                "turns_per_s": turns / seconds,
                "p50_ms": percentile(latencies, 0.50),
                "p95_ms": percentile(latencies, 0.95),
                "conn_max": max(c[0] for c in connections),
                "conn_mean": statistics.fmean(c[0] for c in connections),
                "active_max": max(c[1] for c in connections),
                "in_transaction_max": max(c[2] for c in connections),
                "wal_mb_s": wal / seconds / 1e6,
                "wal_kb_turn": per_turn(wal, turns, 1e-3),
                "xacts_s": xacts / seconds,
                "xacts_turn": per_turn(xacts, turns),
                "write_xacts_turn": per_turn(write_xacts, turns),
                "db_kb_turn": per_turn(after["db_bytes"] - before["db_bytes"], turns, 1e-3),
                "cores": {part: cpu[part] / seconds for part in CPU_PARTS[:4]}
                | {"other": max(0.0, cpu["machine"] - ours) / seconds},
                "machine_busy": cpu["machine"] / (seconds * cpus),
                "pg_ms_turn": per_turn(cpu["pg"], turns, 1e3),
                "memvm_ms_turn": per_turn(cpu["memvm"], turns, 1e3),
                "loadavg": " ".join(f"{x:.2f}" for x in step["loadavg"]),
            }
        )
    return rows


def fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


STEP_HEADER = (
    "| R | c | turns/s | p50 ms | p95 ms | errors | DB conns max (active, idle in xact) | WAL MB/s | WAL KB/turn "
    "| xacts/s | xacts/turn | CPU cores: postgres | memvm | fake LLM | driver | others | machine busy | load avg |"
)


def step_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [STEP_HEADER, "|---:" * 17 + "|---|"]
    for r in rows:
        c = r["cores"]
        connections = f"{r['conn_max']} ({r['active_max']}, {r['in_transaction_max']})"
        lines.append(
            f"| {r['replicas']} | {r['concurrency']} | {fmt(r['turns_per_s'])} | {fmt(r['p50_ms'], 0)} | {fmt(r['p95_ms'], 0)} "
            f"| {r['errors']} | {connections} | {fmt(r['wal_mb_s'], 2)} | {fmt(r['wal_kb_turn'])} "
            f"| {fmt(r['xacts_s'], 0)} | {fmt(r['xacts_turn'])} | {c['pg']:.2f} | {c['memvm']:.2f} | {c['llm']:.2f} "
            f"| {c['driver']:.2f} | {c['other']:.2f} | {r['machine_busy']:.0%} | {r['loadavg']} |"
        )
    return lines


def unit_costs(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over the steps that completed turns without errors (else all that completed turns)."""
    measured = [r for r in rows if r["turns"] and not r["errors"]] or [r for r in rows if r["turns"]]

    def median(key: str) -> float:
        return float(statistics.median(r[key] for r in measured))

    busiest = max(r["concurrency"] for r in measured)
    per_replica = [r["conn_max"] / r["replicas"] for r in measured if r["concurrency"] == busiest]
    return {
        "pg_ms_turn": median("pg_ms_turn"),
        "memvm_ms_turn": median("memvm_ms_turn"),
        "wal_kb_turn": median("wal_kb_turn"),
        "xacts_turn": median("xacts_turn"),
        "write_xacts_turn": median("write_xacts_turn"),
        "db_kb_turn": median("db_kb_turn"),
        "conns_per_replica": max(per_replica),
        "busiest_concurrency": busiest,
    }


def saturation_lines(rows: list[dict[str, Any]], max_connections: int) -> list[str]:
    lines = []
    for replicas in sorted({r["replicas"] for r in rows}):
        mine = [r for r in rows if r["replicas"] == replicas]
        best = max(mine, key=lambda r: r["turns_per_s"])
        steps = ", ".join(f"c={r['concurrency']}: {r['turns_per_s']:.1f}" for r in mine)
        c = best["cores"]
        lines.append(
            f"- R={replicas}: turns/s {steps}; best at c={best['concurrency']} with the machine {best['machine_busy']:.0%} busy "
            f"(postgres {c['pg']:.2f} cores, memvm {c['memvm']:.2f}, driver {c['driver']:.2f}, fake LLM {c['llm']:.2f}, "
            f"others {c['other']:.2f}); at most {max(r['conn_max'] for r in mine)} of {max_connections} connections."
        )
        lines += [
            f"  - c={r['concurrency']}: {r['conn_max']} connections, {r['errors']} failed turns {r['error_kinds']}"
            for r in mine
            if r["errors"]
        ]
    return lines


def db_host_table(costs: dict[str, float], max_connections: int) -> list[str]:
    lines = [
        "| DB host cores | turns/s ceiling (DB CPU alone) | WAL MB/s there | memvm cores to drive it | replicas (1 process each) "
        "| connections at the measured per-replica peak | vs max_connections |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for cores in DB_HOST_CORES:
        ceiling = cores * 1000 / costs["pg_ms_turn"]
        app_cores = ceiling * costs["memvm_ms_turn"] / 1000
        replicas = max(1, math.ceil(app_cores))
        connections = replicas * costs["conns_per_replica"]
        verdict = "fits" if connections <= max_connections else f"over: max_connections ≥ {connections:,.0f}, or smaller pools"
        lines.append(
            f"| {cores} | {ceiling:,.0f} | {ceiling * costs['wal_kb_turn'] / 1000:,.1f} | {app_cores:,.0f} | {replicas} "
            f"| {connections:,.0f} | {verdict} |"
        )
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    rows, settings = report["rows"], report["settings"]
    max_connections = int(settings.get("max_connections", 100))
    costs = unit_costs(rows)
    cfg, memvm = report["config"], report["memvm"]
    changed = " with uncommitted changes under src/" if memvm["changed"] else ""
    lines = [
        f"# memvm: where one database saturates — {report['started']['utc']}",
        "",
        f"`{report['command']}` on {report['cpus']} CPUs, memvm from {memvm['src']} at {memvm['head']}{changed}; "
        f"load average before {fmt_load(report['started'])}, "
        f"after {fmt_load(report['finished'])}. PostgreSQL {settings.get('server_version')} (embedded), "
        f"max_connections {max_connections}, shared_buffers {settings.get('shared_buffers')} × 8 kB, "
        f"synchronous_commit {settings.get('synchronous_commit')}. Pools per replica: MEMVM_DB_POOL_SIZE "
        f"{cfg.get('db_pool_size') or '20 (default)'}, MEMVM_DB_MAX_OVERFLOW {cfg.get('db_max_overflow') or '20 (default)'}, "
        f"MEMVM_DB_TURN_LOCK_POOL_SIZE {cfg.get('db_turn_lock_pool_size') or '20 (default)'}. "
        f"{cfg['orgs']} organizations × {cfg['agents']} agents; "
        f"{cfg['warmup']:.0f} s warm-up + {cfg['step_seconds']:.0f} s measured per step. R = replicas (`memvm serve`, "
        "MEMVM_WORKERS=1 each), c = concurrent clients. A turn = 2 model calls (instant fake LLM) + 1 memory tool.",
        "",
        *step_table(rows),
        "",
        "## Per turn (medians over the steps)",
        "",
        f"PostgreSQL CPU {costs['pg_ms_turn']:.1f} ms, memvm CPU {costs['memvm_ms_turn']:.1f} ms, "
        f"WAL {costs['wal_kb_turn']:.1f} KB, {costs['xacts_turn']:.1f} transactions "
        f"({costs['write_xacts_turn']:.1f} with writes), database growth {costs['db_kb_turn']:.1f} KB; "
        f"connections per replica at c={costs['busiest_concurrency']:.0f}: up to {costs['conns_per_replica']:.0f}.",
        "",
        "## Where it stops scaling",
        "",
        *saturation_lines(rows, max_connections),
        "",
        "## A dedicated database host at the measured cost per turn",
        "",
        "Linear in cores: an upper bound (lock and WAL-insert contention, checkpoints and vacuum are not modelled).",
        "",
        *db_host_table(costs, max_connections),
    ]
    return "\n".join(lines) + "\n"


def fmt_load(moment: dict[str, Any]) -> str:
    return " ".join(f"{x:.2f}" for x in moment["loadavg"])
