"""Reciprocal rank fusion of two ranked lists (pure)."""

from collections.abc import Sequence
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
    fused = [
        Fused(
            id=item,
            rrf_score=_part(fts_weight, k, fts_rank.get(item)) + _part(vector_weight, k, vector_rank.get(item)),
            fts_rank=fts_rank.get(item),
            vector_rank=vector_rank.get(item),
        )
        for item in dict.fromkeys([*fts_ids, *vector_ids])
    ]
    fused.sort(key=lambda f: (-f.rrf_score, min(r for r in (f.fts_rank, f.vector_rank) if r is not None), f.id))
    return fused[:limit]


def _part(weight: float, k: int, rank: int | None) -> float:
    return 0.0 if rank is None else weight / (k + rank)


def _ranks(ids: Sequence[str]) -> dict[str, int]:
    """1-based rank of each id; a repeated id keeps its first (best) rank."""
    ranks: dict[str, int] = {}
    for rank, item in enumerate(ids, start=1):
        ranks.setdefault(item, rank)
    return ranks
