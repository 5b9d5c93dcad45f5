import math

from memvm.search.lexical import TermMatch, rank_by_term_rarity, with_previous_turns


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


def test_the_turn_after_a_match_matches_the_word_at_the_context_weight_once():
    said = matches(0, [("question", 1), ("says-it-too", 3)])
    next_turn = {"question": ("answer", 2), "says-it-too": ("later", 4), "unmatched": ("never", 6)}

    found = with_previous_turns(said, next_turn, weight=0.5)

    assert {(m.id, m.weight) for m in found} == {("question", 1.0), ("says-it-too", 1.0), ("answer", 0.5), ("later", 0.5)}
    assert next(m.recency for m in found if m.id == "answer") == 2  # ordered as the message itself


def test_a_message_saying_the_word_itself_keeps_its_own_weight():
    said = matches(0, [("question", 1), ("answer", 2)])
    found = with_previous_turns(said, {"question": ("answer", 2)}, weight=0.5)
    assert found == said  # "answer" is not matched a second time at the lower weight


def test_a_lent_match_scores_its_weight_times_the_word_s_rarity():
    found = with_previous_turns(matches(0, [("question", 1)]), {"question": ("answer", 2)}, weight=0.5)
    found += matches(1, [("other", 5)])
    # df of lexeme 0 is 2 (the turn that said it and the one after); lexeme 1 matches once
    scores = {"question": math.log1p(4 / 2), "answer": 0.5 * math.log1p(4 / 2), "other": math.log1p(4 / 1)}
    assert rank_by_term_rarity(found, window=4, limit=5) == sorted(scores, key=lambda i: -scores[i])
