"""Full-text ranking of the matches the database found, one list per query lexeme (pure)."""

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TermMatch:
    term: int  # index of the query lexeme
    id: str
    seq: int  # insertion order: larger is newer


def rank_by_term_rarity(
    matches: Iterable[TermMatch], *, window: int, limit: int, weights: Mapping[int, float] | None = None
) -> list[str]:
    """Ids best first. Each lexeme brings at most its `window` newest matches; a message scores
    Σ log(1 + window / df) over the lexemes it matches, df = that lexeme's match count here. So a
    rare word outweighs several common ones, as IDF does in BM25 (term frequency and length are
    left out: messages are short). A lexeme with a full window is common; its true df is larger,
    which only lowers its weight further. Ties go to the newer message. `weights`: a factor per term
    (1 when absent), for words the query did not say itself (search.feedback)."""
    matches = list(matches)
    df = Counter(m.term for m in matches)
    score: dict[str, float] = defaultdict(float)
    seq: dict[str, int] = {}
    factor = weights or {}
    for m in matches:
        score[m.id] += factor.get(m.term, 1.0) * math.log1p(window / df[m.term])
        seq[m.id] = m.seq
    return sorted(score, key=lambda i: (-score[i], -seq[i]))[:limit]
