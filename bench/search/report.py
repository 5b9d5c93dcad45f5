"""The report: its skeleton, the summary table, the markdown, and the files written at the end."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from .common import loadavg

TARGETS = {
    "archival_search_p95_ms": 10.0,
    "archival_recall_at_10": 0.95,
    "hybrid_search_p95_ms": 20.0,
}


def machine_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "httpx": httpx.__version__,
        "asyncpg": asyncpg.__version__,
        "loadavg_start": loadavg(),
    }
    try:
        facts["mem_total_kb"] = int(Path("/proc/meminfo").read_text().split()[1])
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
    except Exception:
        pass
    return facts


def new_report(a: argparse.Namespace) -> dict[str, Any]:
    return {"machine": machine_facts(), "params": dict(vars(a)), "targets": TARGETS, "phases": {}, "http_errors": [], "notes": []}


def _cpu(st: dict) -> str:
    a, b = st.get("server_cpu_ms_per_op"), st.get("db_cpu_ms_per_op")
    return "" if a is None else f"{a} + {b}"


def _row(
    op: str, size: int | None, st: dict, *, cpu: bool = False, quality: str = "-", target: str = "-", passed: bool | None = None
) -> dict[str, Any]:
    row = {"op": op, "size": size, "p50_ms": st.get("p50_ms"), "p95_ms": st.get("p95_ms")}
    if cpu:
        row["cpu"] = _cpu(st)
    return {**row, "quality": quality, "target": target, "pass": passed}


def _archival_rows(p: dict[str, Any], size: int, is_target: bool) -> list[dict[str, Any]]:
    s = p["plain_c1"]
    ok = None
    if is_target and s.get("p95_ms") is not None and p.get("recall_at_10") is not None:
        ok = s["p95_ms"] <= TARGETS["archival_search_p95_ms"] and p["recall_at_10"] >= TARGETS["archival_recall_at_10"]
    target = "p95 ≤ 10 ms, recall ≥ 0.95" if is_target else "-"
    rows = [
        _row(
            "archival search (HTTP, top_k=10)",
            size,
            s,
            cpu=True,
            quality=f"recall@10 {p.get('recall_at_10')}",
            target=target,
            passed=ok,
        )
    ]
    r = p.get("repeated_c1")
    if r:
        rows.append(_row("  archival search, repeated text (query vector cached)", size, r, cpu=True))
    f = p["tagged_filled"]
    quality = f"filled {f['full']}/{f['queries']}, recall@10 {p.get('tagged_recall_at_10')}"
    rows.append(
        _row(
            "archival search + tag on 2% (HTTP)",
            size,
            p["tagged_c1"],
            cpu=True,
            quality=quality,
            target="top_k filled",
            passed=f["full"] == f["queries"],
        )
    )
    rows.append(_row("  archival: server SQL alone", size, p["sql_plain"]["client_timed"]))
    return rows


def _message_rows(m: dict[str, Any], n: int) -> list[dict[str, Any]]:
    s = m.get("hybrid_c1") or {}
    ok = None if s.get("p95_ms") is None else (s["p95_ms"] <= TARGETS["hybrid_search_p95_ms"] if n >= 100_000 else None)
    hits = m.get("hybrid_results_per_query") or {}
    target = "p95 ≤ 20 ms" if n >= 100_000 else "-"
    rows = [
        _row(
            "hybrid message search (HTTP)",
            n,
            s,
            cpu=True,
            quality=f"{hits.get('min')}–{hits.get('max')} hits",
            target=target,
            passed=ok,
        )
    ]
    r = m.get("hybrid_repeated_c1")
    if r:
        rows.append(_row("  hybrid search, repeated text (query vector cached)", n, r, cpu=True))
    for mode in ("fts", "vector"):
        quality = f"recall@10 {m.get('vector_recall_at_10')}" if mode == "vector" else "-"
        rows.append(_row(f"  {mode}-only message search (HTTP)", n, m.get(f"{mode}_c1") or {}, cpu=True, quality=quality))
    quality = f"{m['fts_matching_rows']['median']} matching rows (median)"
    rows.append(_row("  fts ranking SQL alone", n, m["sql_fts"]["client_timed"], quality=quality))
    if "sql_hybrid" in m:
        rows.append(_row("  hybrid rankings SQL alone (one statement)", n, m["sql_hybrid"]["client_timed"]))
    rows.append(_row("  vector ranking SQL alone", n, m["sql_vector"]["client_timed"]))
    return rows


def _embedding_rows(emb: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _row("embed one query (in-process)", 1, emb["single"], quality=f"{emb['single']['sentences_per_s']} sentences/s"),
        _row("embed batch (in-process)", emb["batch"]["sentences"], {}, quality=f"{emb['batch']['sentences_per_s']} sentences/s"),
    ]


def summary(report: dict[str, Any], sizes: list[int], messages: int) -> list[dict[str, Any]]:
    ph = report["phases"]
    big = max(sizes) if sizes else None
    rows = []
    for size in sizes:
        p = ph.get(f"archival_{size}")
        if p:
            rows += _archival_rows(p, size, size == big and size >= 100_000)
    m = ph.get(f"messages_{messages}")
    if m:
        rows += _message_rows(m, messages)
    emb = report.get("embedding") or {}
    if emb:
        rows += _embedding_rows(emb)
    rows.append(_row("  HTTP floor: GET /v1/health/", None, report.get("http_floor_health") or {}))
    return rows


def _cell(v: Any) -> Any:
    return "" if v is None else v


def _header(report: dict[str, Any]) -> list[str]:
    m = report["machine"]
    pg = report.get("postgres", {})
    lines = [
        f"# memvm search bench — {m['date_utc']}",
        "",
        f"{m.get('nproc')} cores ({m.get('cpu', '?')}), Python {m['python']}, PostgreSQL {pg.get('version')}, "
        f"pgvector {pg.get('pgvector')}; load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')}.",
        "",
        "| op | size | p50 ms | p95 ms | recall@10 / filled | target | pass | CPU ms/op memvm + pg |",
        "|---|---:|---:|---:|---|---|---|---:|",
    ]
    for r in report.get("summary", []):
        p = "" if r["pass"] is None else ("**pass**" if r["pass"] else "**FAIL**")
        lines.append(
            f"| {r['op']} | {_cell(r['size'])} | {_cell(r['p50_ms'])} | {_cell(r['p95_ms'])} | "
            f"{r['quality']} | {r['target']} | {p} | {r.get('cpu', '')} |"
        )
    lines.append("")
    if report.get("data"):
        lines += [f"Data: {json.dumps(report['data'])}", ""]
    return lines


def _embedding_line(emb: dict[str, Any]) -> str:
    single, batch, t1 = emb["single"], emb["batch"], emb.get("single_1_thread", {})
    return (
        f"Embedding ({emb['model']}, {emb['threads']} ONNX threads, in-process): "
        f"one short query per call p50 {single['p50_ms']} ms, "
        f"p95 {single['p95_ms']} ms, {single['sentences_per_s']}/s, {single['cpu_ms_per_sentence']} CPU ms each; "
        f"batch of {batch['sentences']} (24 words each) {batch['sentences_per_s']} sentences/s, "
        f"{batch['cpu_ms_per_sentence']} CPU ms each; "
        f"200 per call (an archive batch request) {emb['batch_200']['sentences_per_s']}/s. "
        f"One query with threads=1: p50 {t1.get('p50_ms')} ms, p95 {t1.get('p95_ms')} ms."
    )


def _phase_facts(ph: dict[str, Any]) -> list[str]:
    ix = dict(ph.get("index") or {})
    ix.pop("ddl", None)
    lines = [f"- load: {json.dumps(ph.get('load'))}", f"- index: {json.dumps(ix)}"]
    for v in ph.values():
        if isinstance(v, dict) and "p50_ms" in v and "op" in v:
            lines.append(
                f"- {v['op']} c={v['concurrency']}: n={v['n']} p50 {v['p50_ms']} p95 {v['p95_ms']} p99 {v.get('p99_ms')} ms, "
                f"{v['ops_s']}/s, server CPU {v.get('server_cpu_ms_per_op')} ms/op, errors {v['errors'] or 0}"
            )
    if "fts_variants_sql_only" in ph:
        lines.append(
            "- full-text ranking variants (SQL only, every query text): "
            + "; ".join(
                f"{k}: p50 {v['p50_ms']} ms, p95 {v['p95_ms']} ms (rows median {v['rows_median']})"
                for k, v in ph["fts_variants_sql_only"].items()
            )
        )
    if "similarity_contrast" in ph:
        lines.append(
            f"- similarity of the exact neighbours (mean over queries): {json.dumps(ph['similarity_contrast'])}; "
            f"recall@10 per query: {ph.get('recall_per_query')}"
        )
    if "ef_sweep_sql_only" in ph:
        lines.append(
            "- ef_search sweep (server SQL alone): "
            + "; ".join(f"ef {s['ef_search']}: recall {s['recall_at_10']}, p50 {s['p50_ms']} ms" for s in ph["ef_sweep_sql_only"])
        )
    return lines


def _phase_profile(ph: dict[str, Any]) -> list[str]:
    lines = []
    ip = ph.get("in_process")
    if ip:
        lines.append(
            f"- in-process (same code, same DB, no socket): runtime call p50 {ip['runtime_call_total']['p50_ms']} ms "
            f"p95 {ip['runtime_call_total']['p95_ms']}; whole endpoint via ASGI p50 {ip['asgi_in_process']['p50_ms']} ms "
            f"p95 {ip['asgi_in_process']['p95_ms']}"
        )
        for k, v in ip["stages"].items():
            lines.append(
                f"  - {k}: p50 {v['p50_ms']} ms, p95 {v['p95_ms']} ms, {ip['stage_calls_per_search'][k]} calls per search"
            )
    for k in ("sql_plain", "sql_tagged", "sql_fts", "sql_hybrid", "sql_vector"):
        if k in ph:
            lines += ["", f"### {k}: EXPLAIN (ANALYZE, BUFFERS), first query", "", "```", ph[k]["explain_analyze"], "```"]
            lines += [
                "",
                "Same statement as a generic prepared plan (plan_cache_mode = force_generic_plan):",
                "",
                "```",
                ph[k].get("generic_plan_explain_analyze") or "",
                "```",
            ]
    return lines


def markdown(report: dict[str, Any]) -> str:
    lines = _header(report)
    emb = report.get("embedding")
    if emb:
        lines += [_embedding_line(emb), ""]
    for name, ph in report["phases"].items():
        lines += [f"## {name}", "", *_phase_facts(ph), *_phase_profile(ph), ""]
    if report["http_errors"]:
        lines.append("## HTTP errors")
        for e in report["http_errors"]:
            lines.append(
                f"- `{e['method']} {e['url']}` body `{e['request_body'][:300]}` → {e['status']} `{e['response_body'][:500]}`"
            )
    if report["notes"]:
        lines.append("## Notes")
        lines += [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def write_outputs(report: dict[str, Any], out_json: str | None, out_md: str | None) -> None:
    md = markdown(report)
    if out_json:
        Path(out_json).write_text(json.dumps(report, indent=1, default=str))
    if out_md:
        Path(out_md).write_text(md)
    print()
    print(md.split("\n## ")[0])
    if report["http_errors"]:
        print("HTTP errors:")
        for e in report["http_errors"]:
            print(f"  {e['method']} {e['url']} {e['request_body'][:200]} -> {e['status']} {e['response_body'][:300]}")
