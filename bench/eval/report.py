"""eval.json (everything), eval.md (the tables) and eval.png (recall@10 by method and category)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .data import CATEGORY_NAMES, SCORED_CATEGORIES

GROUP_TITLES = {
    "all": "All conversations",
    "tune": "Tune set (26, 30)",
    "held_out": "Held-out set (41, 42, 43)",
}


def _cell(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def overall_table(results: dict[str, dict[str, dict[str, Any]]], ks: list[str]) -> list[str]:
    """Method × recall@k, all evidence in the top 10, and latency and tokens of the k=10 queries."""
    head = ["method", *(f"R@{k}" for k in ks), "all@10", "p50 ms", "p95 ms", "tokens/query@10"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for method, by_k in results.items():
        at10 = by_k.get("10") or by_k[ks[-1]]
        cells = [f"`{method}`", *(_cell(by_k[k]["recall"]) for k in ks)]
        cells += [
            _cell(at10["all_evidence"]),
            _cell(at10["p50_ms"], 1),
            _cell(at10["p95_ms"], 1),
            _cell(at10["tokens_per_query"], 0),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def category_table(results: dict[str, dict[str, dict[str, Any]]], k: str) -> list[str]:
    """Method × recall@k per category and overall."""
    any_method = next(iter(results.values()))[k]
    counts = any_method["questions_by_category"]
    head = [
        "method",
        *(f"{c} {CATEGORY_NAMES[c]} (n={counts[str(c)]})" for c in SCORED_CATEGORIES),
        f"overall (n={any_method['questions']})",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for method, by_k in results.items():
        row = by_k[k]
        cells = [f"`{method}`", *(_cell(row["recall_by_category"][str(c)]) for c in SCORED_CATEGORIES), _cell(row["recall"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _data_notes(report: dict[str, Any]) -> list[str]:
    lines = ["## Data", "", "| file | turns | sessions | scored questions (cat 1–4) | unknown evidence | ingest s | query s |"]
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for name, c in report["conversations"].items():
        unknown = len(c["questions_with_unknown_evidence"])
        ingest = sum(c["ingest_seconds"].values())
        cells = [
            f"{name}.json",
            c["turns"],
            c["sessions"],
            c["questions_scored"],
            unknown,
            f"{ingest:.1f}",
            f"{c['query_seconds']:.1f}",
        ]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines.append("")
    for name, c in report["conversations"].items():
        if c["questions_without_usable_evidence"]:
            lines.append(
                f"- {name}: {c['questions_without_usable_evidence']} questions of categories 1–4 name no evidence: not scored"
            )
        for q in c["questions_with_unknown_evidence"]:
            kept = q["kept"] or "nothing: not scored"
            lines.append(
                f'- {name}: "{q["question"]}" names evidence not in the conversation: {q["unknown_evidence"]} (kept: {kept})'
            )
        for method, n in c["clipped_tool_returns"].items():
            lines.append(
                f"- {name}: `{method}` returned {n} answers cut at the tool's character limit (scored on the passages left whole)"
            )
    return lines


def markdown(report: dict[str, Any]) -> str:
    meta = report["metadata"]
    ks = [str(k) for k in report["ks"]]
    lines = [
        "# memvm memory quality on LoCoMo (retrieval recall)",
        "",
        f"{meta['date']}; memvm {meta['memvm_version']}; embedding `{meta['embedding_model']}`; data `{meta['data_dir']}`.",
        "recall@k = share of a question's evidence turns among the dia_ids of the top k results, mean over questions;",
        "all@10 = share of questions with every evidence turn in the top 10; latency = client wall clock of one HTTP call",
        "(BM25: in the harness, no HTTP); the routes' query vectors are cached (each question embedded once, untimed, before),",
        "the tools embed the query on every call as a turn does;",
        "tokens = characters of the returned context / 4 (a tool's whole return).",
        "",
        "| method | what |",
        "|---|---|",
        *(f"| `{m}` | {d} |" for m, d in report["methods"].items()),
    ]
    for group, body in report["groups"].items():
        lines += ["", f"## {GROUP_TITLES[group]}: {', '.join(body['conversations'])}", "", *overall_table(body["results"], ks)]
        for k in ks:
            lines += ["", f"recall@{k} by category:", "", *category_table(body["results"], k)]
    lines += ["", *_data_notes(report), ""]
    if report.get("plot_note"):
        lines += [report["plot_note"], ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> str | None:
    """Recall@10 (else at the largest k) by method and category, all conversations; a note instead
    when matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "eval.png not written: matplotlib is not installed (pip install -e '.[test]')."
    results = report["groups"]["all"]["results"]
    k = "10" if 10 in report["ks"] else str(report["ks"][-1])
    labels = [f"{c} {CATEGORY_NAMES[c]}" for c in SCORED_CATEGORIES] + ["overall"]
    figure, axes = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(results)
    for i, (method, by_k) in enumerate(results.items()):
        row = by_k[k]
        values = [row["recall_by_category"][str(c)] or 0.0 for c in SCORED_CATEGORIES] + [row["recall"] or 0.0]
        axes.bar([x + i * width for x in range(len(labels))], values, width, label=method)
    axes.set_xticks([x + width * (len(results) - 1) / 2 for x in range(len(labels))], labels)
    axes.set_ylabel(f"recall@{k}")
    axes.set_ylim(0, 1)
    axes.set_title(f"LoCoMo recall@{k} by method and category ({', '.join(report['groups']['all']['conversations'])})")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return None


def write(report: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / "eval.png"
    report["plot_note"] = plot(report, png)
    (out_dir / "eval.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    (out_dir / "eval.md").write_text(markdown(report))
    return [out_dir / "eval.json", out_dir / "eval.md", *([png] if png.exists() and not report["plot_note"] else [])]
