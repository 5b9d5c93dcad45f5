"""Full-text ranking of the matches the database found, one list per query lexeme (pure)."""

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class TermMatch:
    term: int  # index of the query lexeme
    id: str
    recency: int  # larger is newer (recency_of a time)
    weight: float = 1.0  # below 1 when the message only follows a turn that said the word (with_previous_turns)


def rank_by_term_rarity(
    matches: Iterable[TermMatch], *, window: int, limit: int, weights: Mapping[int, float] | None = None
) -> list[str]:
    """Ids best first. Each lexeme brings at most its `window` newest matches; a message scores
    Σ log(1 + window / df) over the lexemes it matches, df = that lexeme's match count here. So a
    rare word outweighs several common ones, as IDF does in BM25 (term frequency and length are
    left out: messages are short). A lexeme with a full window is common; its true df is larger,
    which only lowers its weight further. Ties go to the newer message. `weights`: a factor per term
    (1 when absent), for words the query did not say itself (search.feedback); each match's own
    `weight` multiplies too."""
    matches = list(matches)
    df = Counter(m.term for m in matches)
    score: dict[str, float] = defaultdict(float)
    recency: dict[str, int] = {}
    factor = weights or {}
    for m in matches:
        score[m.id] += factor.get(m.term, 1.0) * m.weight * math.log1p(window / df[m.term])
        recency[m.id] = m.recency
    return sorted(score, key=lambda i: (-score[i], -recency[i]))[:limit]


def recency_of(moment: datetime) -> int:
    """A stored row's time as a TermMatch's recency (microseconds since the epoch)."""
    return int(moment.timestamp() * 1_000_000)


def with_previous_turns(
    matches: Sequence[TermMatch], next_turn: Mapping[str, tuple[str, int]], *, weight: float
) -> list[TermMatch]:
    """The matches, and for each one the message after it (`next_turn`: id -> (its id, its recency)) as a
    match of the same lexeme at `weight`, unless that message says the word itself: a message is read
    with the turn before it, so an answer ("Yes, in June") is found by the question's words. Measured
    on LoCoMo (issue 29), recall@10 0.691 -> 0.742 tune and 0.713 -> 0.737 held out at weight 1."""
    own = {(m.term, m.id) for m in matches}
    lent: dict[tuple[int, str], TermMatch] = {}
    for m in matches:
        following = next_turn.get(m.id)
        if following is not None and (m.term, following[0]) not in own:
            lent.setdefault((m.term, following[0]), TermMatch(m.term, following[0], following[1], weight))
    return [*matches, *lent.values()]
