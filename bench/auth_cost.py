#!/usr/bin/env python3
"""Cost of authentication per request, from one `workload.py run --targets` result with a local-mode
target and an authenticated one (what `bench/run.sh auth` writes). Prints a markdown table: p50/p95 of
each op and concurrency for both targets, the difference of the p50s in ms and percent, memvm's CPU
per request and the database transactions per request. Stdlib only.

    python3 bench/auth_cost.py results/<stamp>-memvm-auth.json [--local local] [--auth auth]
"""

import argparse
import json
import statistics
from typing import Any


def fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    sign = "+" if signed else ""
    return f"{value:{sign}.1f}" if abs(value) >= 10 else f"{value:{sign}.2f}"


def pair(a: float | None, b: float | None) -> str:
    return f"{fmt(a)} / {fmt(b)}"


def table(local: dict[str, Any], auth: dict[str, Any]) -> list[str]:
    by_key = {(r["op"], r["concurrency"]): r for r in auth["results"]}
    lines = [
        "| op | conc | local p50 ms | local p95 ms | auth p50 ms | auth p95 ms | Δp50 ms | Δp50 % "
        "| memvm CPU ms/op local / auth | DB xacts/op local / auth |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    deltas: dict[int, list[tuple[float, float]]] = {}
    for lo in local["results"]:
        au = by_key.get((lo["op"], lo["concurrency"]))
        if au is None or lo["p50_ms"] is None or au["p50_ms"] is None:
            continue
        delta = au["p50_ms"] - lo["p50_ms"]
        percent = 100 * delta / lo["p50_ms"]
        deltas.setdefault(lo["concurrency"], []).append((delta, percent))
        lines.append(
            f"| {lo['op']} | {lo['concurrency']} | {fmt(lo['p50_ms'])} | {fmt(lo['p95_ms'])} | {fmt(au['p50_ms'])} "
            f"| {fmt(au['p95_ms'])} | **{fmt(delta, signed=True)}** | {percent:+.0f} % "
            f"| {pair(lo.get('server_cpu_ms_per_op'), au.get('server_cpu_ms_per_op'))} "
            f"| {pair((lo.get('db_per_op') or {}).get('xacts'), (au.get('db_per_op') or {}).get('xacts'))} |"
        )
    lines.append("")
    for conc, values in sorted(deltas.items()):
        lines.append(
            f"Median over the {len(values)} ops at concurrency {conc}: Δp50 "
            f"{fmt(statistics.median(d for d, _ in values), signed=True)} ms, "
            f"{statistics.median(p for _, p in values):+.0f} %."
        )
    return lines


def target_notes(target: dict[str, Any]) -> str:
    name = target["target"]["name"]
    if target.get("error"):
        return f"- `{name}`: **failed**: `{target['error']}`"
    failed = {f"{r['op']}@c{r['concurrency']}": r["errors"] for r in target["results"] if r["ok"] != r["count"]}
    cold = (target.get("coldstart") or {}).get("seconds")
    requests = sum(r["count"] for r in target["results"])
    errors = f"non-2xx: {json.dumps(failed)}" if failed else "every measured request answered 2xx"
    return f"- `{name}` ({target['target']['base_url']}): cold start {fmt(cold)} s, {requests} measured requests, {errors}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("result_json")
    parser.add_argument("--local", default="local", help="name of the local-mode target")
    parser.add_argument("--auth", default="auth", help="name of the authenticated target")
    args = parser.parse_args(argv)
    with open(args.result_json) as f:
        report = json.load(f)
    targets = {t["target"]["name"]: t for t in report["targets"]}
    machine = report.get("machine") or {}
    print(f"Measured {machine.get('date_utc', '?')} on {machine.get('nproc', '?')} cores ({machine.get('cpu', '?')}).")
    print("Targets ran one after the other, in this order:")
    print()
    for target in report["targets"]:
        print(target_notes(target))
    print()
    local, auth = targets.get(args.local), targets.get(args.auth)
    if not local or not auth or local.get("error") or auth.get("error"):
        print(f"(no table: need both targets `{args.local}` and `{args.auth}` with results)")
        return 1
    print("\n".join(table(local, auth)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
