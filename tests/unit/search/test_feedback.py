import math

import pytest

from memvm.search.feedback import HitWords, candidate_words, expansion_words, word_weights
from memvm.search.lexical import TermMatch, rank_by_term_rarity


def test_a_word_weighs_its_share_of_each_hit_and_the_better_hit_counts_more():
    best = HitWords({"shelter": 2, "miso": 1, "today": 1}, length=4)
    second = HitWords({"shelter": 1, "vet": 1}, length=2)

    weights = word_weights([best, second], query_lexemes={"miso"})

    assert "miso" not in weights  # the query's own words are not lent back
    assert weights["shelter"] == pytest.approx(2 / 4 + 1 / 2 / 2)
    assert weights["today"] == pytest.approx(1 / 4)
    assert weights["vet"] == pytest.approx(1 / 2 / 2)


def test_the_pool_is_the_heaviest_words_two_per_term_ties_by_word():
    weights = {"a": 0.1, "b": 0.5, "c": 0.5, "d": 0.3, "e": 0.2}

    assert candidate_words(weights, terms=2) == ["b", "c", "d", "e"]
    assert candidate_words(weights, terms=1) == ["b", "c"]


def test_common_words_and_words_of_the_hit_alone_are_never_added():
    weights = {"hello": 1.0, "shelter": 0.2, "adopted": 0.2, "unique": 1.0}
    matches = {"hello": 50, "shelter": 3, "adopted": 9, "unique": 1}

    added = expansion_words(weights, matches, window=50, terms=5)

    assert added == ["shelter", "adopted"]  # the rarer first; a full window and a single match dropped


def test_rarity_can_outweigh_weight_and_the_count_of_terms_is_kept():
    weights = {"often": 0.3, "rare": 0.2, "other": 0.1}
    matches = {"often": 40, "rare": 2, "other": 2}

    assert expansion_words(weights, matches, window=50, terms=1) == ["rare"]
    assert 0.2 * math.log1p(25) > 0.3 * math.log1p(50 / 40)


def test_a_lent_word_counts_at_its_weight():
    said, lent = TermMatch(0, "said", 1), TermMatch(1, "lent", 2)  # equally rare; the lent one is newer

    assert rank_by_term_rarity([said, lent], window=10, limit=5) == ["lent", "said"]
    assert rank_by_term_rarity([said, lent], window=10, limit=5, weights={1: 0.3}) == ["said", "lent"]
    both = rank_by_term_rarity([said, lent, TermMatch(1, "said", 1)], window=10, limit=5, weights={1: 0.3})
    assert both == ["said", "lent"]  # 1 + 0.3 shares, against 0.3
