import math

from memvm.search.lexical import TermMatch, rank_by_term_rarity


def matches(term: int, ids_and_seqs: list[tuple[str, int]]) -> list[TermMatch]:
    return [TermMatch(term, i, s) for i, s in ids_and_seqs]


def test_a_rare_lexeme_outranks_several_common_ones():
    common_a = matches(0, [(f"a{n}", 100 - n) for n in range(10)] + [("both", 50)])
    common_b = matches(1, [(f"b{n}", 80 - n) for n in range(10)] + [("both", 50)])
    rare = matches(2, [("old", 1)])
    ranked = rank_by_term_rarity(common_a + common_b + rare, window=11, limit=5)
    assert ranked[0] == "old"  # one match of a rare word beats two common words
    assert ranked[1] == "both"  # two common words beat one


def test_scores_follow_log_idf_and_ties_go_to_the_newer_message():
    found = matches(0, [("x", 5), ("y", 9)]) + matches(1, [("z", 1)] * 1)
    ranked = rank_by_term_rarity(found, window=4, limit=10)
    # z: log1p(4/1) > x, y: log1p(4/2) each; y is newer than x
    assert ranked == ["z", "y", "x"]
    assert math.log1p(4 / 1) > math.log1p(4 / 2)


def test_limit_and_empty_input():
    assert rank_by_term_rarity([], window=10, limit=5) == []
    many = matches(0, [(f"m{n}", n) for n in range(20)])
    assert rank_by_term_rarity(many, window=20, limit=3) == ["m19", "m18", "m17"]
