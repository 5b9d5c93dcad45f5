"""Okapi BM25 over the turn texts, the lexical baseline (k1 = 1.2, b = 0.75, lowercase words)."""

from __future__ import annotations

import math
import re
from collections import Counter

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    def __init__(self, documents: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.terms = [Counter(tokenize(d)) for d in documents]
        self.lengths = [sum(t.values()) for t in self.terms]
        self.average_length = sum(self.lengths) / max(1, len(self.lengths))
        document_frequency: Counter[str] = Counter()
        for terms in self.terms:
            document_frequency.update(terms.keys())
        n = len(documents)
        # Robertson-Sparck Jones idf with +1 inside the log, so a word in most documents never scores below zero
        self.idf = {w: math.log(1 + (n - df + 0.5) / (df + 0.5)) for w, df in document_frequency.items()}

    def score(self, query: str, index: int) -> float:
        terms, length = self.terms[index], self.lengths[index]
        norm = self.k1 * (1 - self.b + self.b * length / self.average_length)
        total = 0.0
        for word in set(tokenize(query)):
            tf = terms.get(word, 0)
            if tf:
                total += self.idf[word] * tf * (self.k1 + 1) / (tf + norm)
        return total

    def top(self, query: str, k: int) -> list[int]:
        """Indexes of the k best documents with a score above zero, best first (ties: earlier first)."""
        scored = [(s, i) for i in range(len(self.terms)) if (s := self.score(query, i)) > 0]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [i for _, i in scored[:k]]
