"""Reciprocal rank fusion of ranked lists (pure)."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Fused:
    id: str
    rrf_score: float
    fts_rank: int | None  # 1-based rank in the full-text list, None if absent
    vector_rank: int | None  # 1-based rank in the vector list, None if absent


def reciprocal_rank_fusion(
    fts_ids: Sequence[str],
    vector_ids: Sequence[str],
    *,
    limit: int,
    k: int = RRF_K,
    fts_weight: float = 0.5,
    vector_weight: float = 0.5,
) -> list[Fused]:
    """score = w_fts/(k + rank_fts) + w_vec/(k + rank_vec); a list an item is missing from adds 0.
    Sorted by score, then by the better of its two ranks, then by id, so ties are deterministic."""
    fts_rank, vector_rank = _ranks(fts_ids), _ranks(vector_ids)
    fused = fuse_rankings([fts_ids, vector_ids], limit=limit, k=k, weights=[fts_weight, vector_weight])
    return [Fused(item, score, fts_rank.get(item), vector_rank.get(item)) for item, score in fused]


def fuse_rankings(
    rankings: Sequence[Sequence[str]], *, limit: int, k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Any number of ranked lists: score = Σ w/(k + rank) over the lists an item is in, the weights
    equal (summing to 1) unless given. (id, score) pairs sorted by score, then by the item's best rank,
    then by id. Ranks, not scores, so lists whose scores cannot be compared (two embedding models'
    distances) still merge fairly."""
    weights = weights or [1.0 / max(1, len(rankings))] * len(rankings)
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for weight, ids in zip(weights, rankings, strict=True):
        for item, rank in _ranks(ids).items():
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)  # a list without the item adds 0
            best[item] = min(rank, best.get(item, rank))
    return sorted(scores.items(), key=lambda pair: (-pair[1], best[pair[0]], pair[0]))[:limit]


def lend_to_neighbours(
    fused: Sequence[Fused], neighbours: Mapping[str, Sequence[str]], *, weight: float, limit: int
) -> list[Fused]:
    """Each item's score plus `weight` × the best score among the fused items next to it
    (`neighbours`: a fused item → the items just before and after it); an item that is only next to
    one joins with that share alone (both ranks None). Sorted as fuse_rankings sorts."""
    scores = {f.id: f.rrf_score for f in fused}
    lent: dict[str, float] = {}
    for item, score in scores.items():
        for neighbour in neighbours.get(item, ()):
            lent[neighbour] = max(lent.get(neighbour, 0.0), weight * score)
    by_id = {f.id: f for f in fused}
    total = {item: scores.get(item, 0.0) + lent.get(item, 0.0) for item in scores.keys() | lent.keys()}
    ranked = sorted(total, key=lambda item: (-total[item], _best_rank(by_id.get(item)), item))[:limit]
    return [Fused(item, total[item], *_list_ranks(by_id.get(item))) for item in ranked]


def _best_rank(fused: Fused | None) -> float:
    ranks = [rank for rank in _list_ranks(fused) if rank is not None]
    return min(ranks, default=math.inf)


def _list_ranks(fused: Fused | None) -> tuple[int | None, int | None]:
    return (fused.fts_rank, fused.vector_rank) if fused else (None, None)


def _ranks(ids: Sequence[str]) -> dict[str, int]:
    """1-based rank of each id; a repeated id keeps its first (best) rank."""
    ranks: dict[str, int] = {}
    for rank, item in enumerate(ids, start=1):
        ranks.setdefault(item, rank)
    return ranks
