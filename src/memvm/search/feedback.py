"""Pseudo-relevance feedback for full-text message search (pure): the first search's best hits lend
the query a few of their words, so a turn that answers in other words than the question's is found.

RM3-like: a word's weight is its share of each feedback hit (term frequency / the hit's length),
the better hits counting more, times its rarity among the messages searched. A word whose window of
matches is full is common (a greeting, a name said in every other turn) and never added.
"""

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

# The first search's best hits that lend words, and the share of a query word's weight a lent word gets.
FEEDBACK_HITS = 5
FEEDBACK_WEIGHT = 0.3
# Words looked up per word added: the rest of the pool is only a rarity check.
POOL_PER_TERM = 2


@dataclass(frozen=True)
class HitWords:
    """A feedback hit's lexemes with their frequency in it, and its count of distinct lexemes."""

    frequency: Mapping[str, int]
    length: int


def word_weights(hits: Sequence[HitWords], query_lexemes: Collection[str]) -> dict[str, float]:
    """Σ over the hits (best first) of frequency / length / rank, for each word not in the query."""
    weights: dict[str, float] = {}
    for rank, hit in enumerate(hits, start=1):
        for lexeme, frequency in hit.frequency.items():
            if lexeme not in query_lexemes:
                share = frequency / max(1, hit.length) / rank
                weights[lexeme] = weights.get(lexeme, 0.0) + share
    return weights


def candidate_words(weights: Mapping[str, float], terms: int) -> list[str]:
    """The heaviest POOL_PER_TERM × terms words (ties by the word, so the pool is deterministic)."""
    return sorted(weights, key=lambda lexeme: (-weights[lexeme], lexeme))[: POOL_PER_TERM * terms]


def expansion_words(weights: Mapping[str, float], matches: Mapping[str, int], *, window: int, terms: int) -> list[str]:
    """At most `terms` candidates, by weight × log(1 + window / matches). `matches`: each candidate's
    match count, at most `window`. A full window means a common word, a single match only the
    feedback hit itself: neither can find anything new."""
    rarity = {
        lexeme: weights[lexeme] * math.log1p(window / count)
        for lexeme, count in matches.items()
        if lexeme in weights and 2 <= count < window
    }
    return sorted(rarity, key=lambda lexeme: (-rarity[lexeme], lexeme))[:terms]
