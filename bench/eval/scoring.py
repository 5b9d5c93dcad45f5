"""Recall@k and the aggregates of the report. A ranking is a list of units, each the set of dia_ids
one result covers (one turn for a message or a turn passage, a whole session for a session passage)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import mean

Ranking = Sequence[frozenset[str]]


def recall_at_k(evidence: Iterable[str], ranking: Ranking, k: int) -> float:
    """|evidence ∩ dia_ids of the top k results| / |evidence|."""
    wanted = set(evidence)
    if not wanted:
        raise ValueError("a question without evidence cannot be scored")
    found: set[str] = set().union(*ranking[:k]) if ranking[:k] else set()
    return len(wanted & found) / len(wanted)


def all_found(evidence: Iterable[str], ranking: Ranking, k: int) -> bool:
    return recall_at_k(evidence, ranking, k) == 1.0


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * p // 100)))
    return ordered[int(rank) - 1]


@dataclass(frozen=True)
class Outcome:
    """One question asked to one method at one k."""

    category: int
    recall: float
    all_found: bool
    latency_ms: float
    tokens: float


def summarize(outcomes: Sequence[Outcome], categories: Sequence[int]) -> dict[str, object]:
    """Recall per category and overall (mean over questions), share with all evidence found,
    p50/p95 latency and mean tokens per query."""
    by_category = {str(c): [o.recall for o in outcomes if o.category == c] for c in categories}
    latencies = [o.latency_ms for o in outcomes]
    return {
        "questions": len(outcomes),
        "recall": _mean([o.recall for o in outcomes]),
        "recall_by_category": {c: _mean(values) for c, values in by_category.items()},
        "questions_by_category": {c: len(values) for c, values in by_category.items()},
        "all_evidence": _mean([float(o.all_found) for o in outcomes]),
        "p50_ms": _round(percentile(latencies, 50)),
        "p95_ms": _round(percentile(latencies, 95)),
        "tokens_per_query": _mean([o.tokens for o in outcomes], digits=1),
    }


def _mean(values: Sequence[float], digits: int = 4) -> float | None:
    return round(mean(values), digits) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
