"""eval.json (everything), eval.md (the tables) and eval.png (recall@10 by method and category), with a
Letta column beside each of memvm's when Letta ran too."""

from __future__ import annotations

import json
from collections.abc import Callable
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


Results = dict[str, dict[str, dict[str, Any]]]  # method -> k -> summary
NOT_AVAILABLE = "n/a"  # a method the server does not have


def servers(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each server's part of the report by its column name: memvm, and Letta when it ran."""
    return {"memvm": report} | ({"Letta": report["letta"]} if report.get("letta") else {})


def columns(report: dict[str, Any], group: str) -> dict[str, Results]:
    """Each server's results for one group."""
    return {name: part["groups"][group]["results"] for name, part in servers(report).items() if group in part["groups"]}


def _table(labels: list[str], results: dict[str, Results], cells_of: Callable[[dict[str, Any]], list[str]]) -> list[str]:
    """Methods × each label once per server (the server named in the header when there are several);
    a method the server does not have shows n/a."""
    names = list(results)
    head = ["method", *(f"{label} {name}" if len(names) > 1 else label for label in labels for name in names)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for method in results[names[0]]:
        by_server = [cells_of(results[n][method]) if method in results[n] else [NOT_AVAILABLE] * len(labels) for n in names]
        cells = [f"`{method}`", *(row[i] for i in range(len(labels)) for row in by_server)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def overall_table(results: dict[str, Results], ks: list[str]) -> list[str]:
    """Method × recall@k, all evidence in the top 10, and latency and tokens of the k=10 queries."""

    def cells(by_k: dict[str, Any]) -> list[str]:
        at10 = by_k.get("10") or by_k[ks[-1]]
        return [
            *(_cell(by_k[k]["recall"]) for k in ks),
            _cell(at10["all_evidence"]),
            _cell(at10["p50_ms"], 1),
            _cell(at10["p95_ms"], 1),
            _cell(at10["tokens_per_query"], 0),
        ]

    return _table([*(f"R@{k}" for k in ks), "all@10", "p50 ms", "p95 ms", "tokens/query@10"], results, cells)


def category_table(results: dict[str, Results], k: str) -> list[str]:
    """Method × recall@k per category and overall."""
    any_method = next(iter(next(iter(results.values())).values()))[k]
    counts = any_method["questions_by_category"]
    labels = [f"{c} {CATEGORY_NAMES[c]} (n={counts[str(c)]})" for c in SCORED_CATEGORIES]

    def cells(by_k: dict[str, Any]) -> list[str]:
        row = by_k[k]
        return [*(_cell(row["recall_by_category"][str(c)]) for c in SCORED_CATEGORIES), _cell(row["recall"])]

    return _table([*labels, f"overall (n={any_method['questions']})"], results, cells)


def _data_notes(report: dict[str, Any]) -> list[str]:
    parts = servers(report)
    several = len(parts) > 1
    per_server = [f"{what} {name}" if several else what for name in parts for what in ("ingest s", "query s", "lost turns")]
    head = ["file", "turns", "sessions", "scored questions (cat 1–4)", "unknown evidence", *per_server]
    lines = ["## Data", "", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, c in report["conversations"].items():
        cells = [f"{name}.json", c["turns"], c["sessions"], c["questions_scored"], len(c["questions_with_unknown_evidence"])]
        for part in parts.values():
            mine = part["conversations"].get(name)  # none yet: a run saved part way
            if mine is None:
                cells += ["–"] * 3
                continue
            cells += [f"{sum(mine['ingest_seconds'].values()):.1f}", f"{mine['query_seconds']:.1f}", len(mine["lost_turns"])]
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
        for server, part in parts.items():
            mine = part["conversations"].get(name) or {"lost_turns": [], "clipped_tool_returns": {}}
            if mine["lost_turns"]:
                lines.append(f"- {name}: {server} did not list back {len(mine['lost_turns'])} turns: {mine['lost_turns']}")
            for method, n in mine["clipped_tool_returns"].items():
                lines.append(
                    f"- {name}: {server} `{method}` returned {n} answers cut at the tool's character limit"
                    " (scored on the passages left whole)"
                )
    return lines


def _letta_lines(report: dict[str, Any]) -> list[str]:
    """Letta's version, how it embedded, the methods it lacks and how its tools search."""
    letta = report.get("letta")
    if not letta:
        return []
    meta, embedding = letta["metadata"], letta["metadata"]["embedding_config"]
    memvm_load = report["metadata"].get("load_average") or ["?"]
    return [
        "",
        f"Letta {meta['letta_version']} in the same run: the same conversations through the same routes (agent-file import,"
        f" archival-memory inserts, the tools' run route), its agents embedding with `{embedding['embedding_model']}`"
        f" ({embedding['embedding_dim']}-d) at `{embedding['embedding_endpoint']}` (a relay to memvm's `POST /v1/embeddings`"
        " that closes each connection, bench/eval/relay.py): memvm's own model, so both store the same"
        " vectors. Load average (1/5/15 min) before and after each server's part:"
        f" memvm {' → '.join(memvm_load)}; Letta {' → '.join(meta['load_average'])}."
        f" Letta's part covers {meta.get('conversations_done', 'all')} conversations.",
        *(f"- {note}" for note in letta["notes"]),
        *(f"- `{method}`: n/a on Letta: {why}." for method, why in letta["not_available"].items()),
    ]


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
        *_letta_lines(report),
        "",
        "| method | what |",
        "|---|---|",
        *(f"| `{m}` | {d} |" for m, d in report["methods"].items()),
    ]
    for group, body in report["groups"].items():
        results = columns(report, group)
        lines += ["", f"## {GROUP_TITLES[group]}: {', '.join(body['conversations'])}", "", *overall_table(results, ks)]
        for k in ks:
            lines += ["", f"recall@{k} by category:", "", *category_table(results, k)]
    lines += ["", *_data_notes(report), ""]
    if report.get("plot_note"):
        lines += [report["plot_note"], ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> str | None:
    """Recall@10 (else at the largest k) by method and category, all conversations, each server's
    methods side by side (Letta's hatched); a note instead when matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "eval.png not written: matplotlib is not installed (pip install -e '.[test]')."
    k = "10" if 10 in report["ks"] else str(report["ks"][-1])
    series = [
        (method if server == "memvm" else f"{method} ({server})", by_k[k], server != "memvm")
        for server, results in columns(report, "all").items()
        for method, by_k in results.items()
    ]
    labels = [f"{c} {CATEGORY_NAMES[c]}" for c in SCORED_CATEGORIES] + ["overall"]
    figure, axes = plt.subplots(figsize=(12, 5))
    width = 0.8 / len(series)
    for i, (label, row, hatched) in enumerate(series):
        values = [row["recall_by_category"][str(c)] or 0.0 for c in SCORED_CATEGORIES] + [row["recall"] or 0.0]
        bars = [x + i * width for x in range(len(labels))]
        axes.bar(bars, values, width, label=label, hatch="//" if hatched else None, edgecolor="black" if hatched else None)
    axes.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(labels))], labels)
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
