#!/usr/bin/env python3
"""Print a p50/p95 side-by-side table: memvm result JSON vs. a Letta result JSON.

Both files are written by ../shared/bench/workload.py (`run --out-json`). This only reads them;
`workload.py compare` prints the full per-target reports and its own ops/s + p95 table.

    python3 bench/sidebyside.py bench/results/<stamp>-memvm.json \
        [--letta ../shared/bench/results-letta-0.16.8.json] [--letta-target letta-0.16.8]

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# An agent turn first, then the memory CRUD ops in workload order.
ORDER = [
    "send_message",
    "list_messages",
    "create_agent",
    "get_agent",
    "get_block",
    "list_blocks",
    "patch_block",
    "attach_block",
    "detach_block",
    "recompile",
    "insert_passage",
    "search_passages",
]


def load_target(path: str, name: str | None) -> dict | None:
    with open(path) as f:
        report = json.load(f)
    targets = report.get("targets") or []
    if name:
        for t in targets:
            if t.get("target", {}).get("name") == name:
                return t
        return None
    return targets[0] if targets else None


def by_key(target: dict | None) -> dict:
    if not target:
        return {}
    return {(r["op"], r["concurrency"]): r for r in target.get("results") or []}


def fmt(v, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if abs(v) < 10 and digits:
            return f"{v:.2f}"
        return f"{v:.{digits}f}"
    return str(v)


def ratio(a, b) -> str:
    if not a or not b:
        return "-"
    return f"{b / a:.1f}×"


def table(mine: dict, ref: dict, mine_name: str, ref_name: str | None) -> list[str]:
    keys = sorted(set(mine) | set(ref), key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[1]))
    lines = []
    if ref_name:
        lines.append(
            f"| op | conc | {mine_name} p50 ms | {mine_name} p95 ms | {mine_name} ops/s | {mine_name} CPU ms/op "
            f"| {ref_name} p50 ms | {ref_name} p95 ms | {ref_name} ops/s | {ref_name} CPU ms/op | p50 {ref_name} ÷ {mine_name} |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    else:
        lines.append(
            f"| op | conc | {mine_name} p50 ms | {mine_name} p95 ms | {mine_name} ops/s | {mine_name} CPU ms/op "
            "| LLM calls/op | errors |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---|")
    for k in keys:
        m, r = mine.get(k), ref.get(k)
        mc = (
            [fmt(m["p50_ms"]), fmt(m["p95_ms"]), fmt(m["throughput_ops_s"]), fmt(m.get("server_cpu_ms_per_op"))]
            if m
            else ["not run"] + ["-"] * 3
        )
        if m and m.get("errors"):
            mc[0] += f" (errors {m['errors']})"
        if ref_name:
            rc = (
                [fmt(r["p50_ms"]), fmt(r["p95_ms"]), fmt(r["throughput_ops_s"]), fmt(r.get("server_cpu_ms_per_op"))]
                if r
                else ["-"] * 4
            )
            lines.append(f"| {k[0]} | {k[1]} | " + " | ".join(mc + rc) + f" | {ratio(m and m['p50_ms'], r and r['p50_ms'])} |")
        else:
            lines.append(
                f"| {k[0]} | {k[1]} | "
                + " | ".join(mc)
                + f" | {fmt(m.get('llm_chat_calls_per_op')) if m else '-'} | {(m or {}).get('errors') or ''} |"
            )
    return lines


def scaling(mine: dict, ref: dict | None, mine_name: str, ref_name: str | None) -> list[str]:
    """Archival search latency vs. archive size (workload.py's archival scaling phase), and the bulk load rate."""
    ms = (mine or {}).get("archival_scaling") or {}
    rs = (ref or {}).get("archival_scaling") or {}
    if not ms.get("sizes") and not rs.get("sizes"):
        return []
    lines = ["", "Archival search vs. archive size (`GET /v1/agents/{id}/archival-memory/search?query=<4 words>&top_k=10`):", ""]
    head = f"| passages | conc | {mine_name} p50 ms | {mine_name} p95 ms | {mine_name} ops/s"
    rule = "|---:|---:|---:|---:|---:"
    if ref_name:
        head += f" | {ref_name} p50 ms | {ref_name} p95 ms | {ref_name} ops/s | p50 {ref_name} ÷ {mine_name}"
        rule += "|---:|---:|---:|---:"
    lines += [head + " |", rule + "|"]
    sizes = sorted({*(ms.get("sizes") or {}), *(rs.get("sizes") or {})}, key=int)
    for size in sizes:
        me, re_ = (ms.get("sizes") or {}).get(size) or {}, (rs.get("sizes") or {}).get(size) or {}
        concs = sorted({k for k in (*me, *re_) if k.startswith("c")}, key=lambda k: int(k[1:]))
        for c in concs:
            m, r = me.get(c), re_.get(c)
            cells = [fmt(m["p50_ms"]), fmt(m["p95_ms"]), fmt(m["throughput_ops_s"])] if m else ["not run", "-", "-"]
            if m and m.get("errors"):
                cells[0] += f" (errors {m['errors']})"
            row = f"| {me.get('actual_size', size)} | {c[1:]} | " + " | ".join(cells)
            if ref_name:
                rc = [fmt(r["p50_ms"]), fmt(r["p95_ms"]), fmt(r["throughput_ops_s"])] if r else ["-"] * 3
                row += " | " + " | ".join(rc) + f" | {ratio(m and m['p50_ms'], r and r['p50_ms'])}"
            lines.append(row + " |")
    for name, sc in ((mine_name, ms), (ref_name, rs)):
        for ld in sc.get("load") or []:
            lines.append(
                f"- {name} bulk load to {ld['to_size']}: +{ld['inserted']} passages in {ld['seconds']} s "
                f"({fmt(ld.get('passages_per_s'))}/s, {ld.get('mode')})"
            )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mine", help="memvm result JSON from workload.py run")
    ap.add_argument("--mine-target", default=None, help="target name inside it (default: the first)")
    ap.add_argument("--letta", default=None, help="Letta result JSON (e.g. ../shared/bench/results-letta-0.16.8.json)")
    ap.add_argument("--letta-target", default="letta-0.16.8", help="target name inside the Letta JSON")
    a = ap.parse_args()

    mt = load_target(a.mine, a.mine_target)
    if not mt:
        print(f"no target in {a.mine}", file=sys.stderr)
        return 1
    mine_name = mt["target"]["name"]
    rt = None
    if a.letta and os.path.exists(a.letta):
        rt = load_target(a.letta, a.letta_target)
        if not rt:
            print(f"(no target {a.letta_target!r} in {a.letta}; printing {mine_name} alone)", file=sys.stderr)
    with open(a.mine) as f:
        machine = json.load(f).get("machine") or {}

    out = [
        f"### {mine_name}"
        + (f" vs {rt['target']['name']}" + (" (same run)" if a.letta == a.mine else " (published)") if rt else "")
        + " — latency per request, fake instant LLM",
        "",
    ]
    out.append(
        f"{mine_name}: {machine.get('date_utc', '?')}, {machine.get('nproc', '?')} cores ({machine.get('cpu', '?')}), "
        f"Python {machine.get('python', '?')}"
    )
    cs = mt.get("coldstart") or {}
    if cs:
        out.append(
            f"{mine_name}: cold start {fmt(cs.get('seconds'))} s, idle RSS {fmt((cs.get('rss_kb') or 0) / 1024)} MiB, "
            f"RSS after workload {fmt((mt.get('rss_kb_after') or 0) / 1024)} MiB"
        )
    if rt:
        rcs = rt.get("coldstart") or {}
        out.append(
            f"{rt['target']['name']}: cold start {fmt(rcs.get('seconds'))} s, "
            f"idle RSS {fmt((rcs.get('rss_kb') or 0) / 1024)} MiB, "
            f"RSS after workload {fmt((rt.get('rss_kb_after') or 0) / 1024)} MiB"
        )
    out.append("")
    out += table(by_key(mt), by_key(rt) if rt else {}, mine_name, rt["target"]["name"] if rt else None)
    errs = mt.get("errors_seen") or {}
    real = {k: v for k, v in errs.items() if not k.startswith("probe:")}
    out.append("")
    if real:
        out.append(f"{mine_name} errors (op:kind count): {json.dumps(real)}")
        for k, v in (mt.get("error_samples") or {}).items():
            if not k.startswith("probe:"):
                out.append(f"- `{k}`: `{v[:300]}`")
    else:
        out.append(f"{mine_name}: no errors on measured ops" + (f" (optional probes: {json.dumps(errs)})" if errs else ""))
    out += scaling(mt, rt, mine_name, rt["target"]["name"] if rt else None)
    shapes = (mt.get("samples") or {}).get("send_message_shapes")
    if shapes:
        out.append(f"{mine_name} send_message shapes (stop_reason|steps|message types: count): {json.dumps(shapes)}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
