import pytest

from memvm.search.fusion import fuse_rankings, lend_to_neighbours, reciprocal_rank_fusion


def test_items_in_both_lists_outrank_items_in_one():
    fused = reciprocal_rank_fusion(["a", "b", "c"], ["c", "d"], limit=10)

    assert [f.id for f in fused][0] == "c"
    assert fused[0].fts_rank == 3 and fused[0].vector_rank == 1
    assert fused[0].rrf_score == pytest.approx(0.5 / 63 + 0.5 / 61)


def test_scores_follow_the_formula_and_missing_lists_add_nothing():
    fused = {f.id: f for f in reciprocal_rank_fusion(["a"], ["b"], limit=10)}

    assert fused["a"].rrf_score == pytest.approx(0.5 / 61) and fused["a"].vector_rank is None
    assert fused["b"].rrf_score == pytest.approx(0.5 / 61) and fused["b"].fts_rank is None


def test_ties_are_broken_deterministically_and_limit_applies():
    fused = reciprocal_rank_fusion(["x", "y"], ["y", "x"], limit=1)

    assert [f.id for f in fused] == ["x"]


def test_weights_shift_the_order():
    fts_heavy = reciprocal_rank_fusion(["a"], ["b"], limit=2, fts_weight=0.9, vector_weight=0.1)
    vector_heavy = reciprocal_rank_fusion(["a"], ["b"], limit=2, fts_weight=0.1, vector_weight=0.9)

    assert [f.id for f in fts_heavy] == ["a", "b"]
    assert [f.id for f in vector_heavy] == ["b", "a"]


def test_empty_lists_give_nothing():
    assert reciprocal_rank_fusion([], [], limit=5) == []


def test_duplicates_within_a_list_keep_their_first_rank():
    fused = reciprocal_rank_fusion(["a", "a", "b"], [], limit=5)

    assert [(f.id, f.fts_rank) for f in fused] == [("a", 1), ("b", 3)]


def test_any_number_of_rankings_merge_by_rank_with_equal_weights():
    fused = fuse_rankings([["a", "b"], ["c"], ["d", "a"]], limit=10)

    assert [item for item, _ in fused] == ["a", "c", "d", "b"]
    assert dict(fused)["a"] == pytest.approx(1 / 3 / 61 + 1 / 3 / 62)
    assert dict(fused)["c"] == pytest.approx(1 / 3 / 61)
    assert fuse_rankings([], limit=3) == []


def test_a_hit_lends_a_share_of_its_score_to_its_neighbours_which_join_without_ranks():
    fused = reciprocal_rank_fusion(["q", "far"], [], limit=10, k=10)

    lent = lend_to_neighbours(fused, {"q": ["before", "after"], "far": []}, weight=0.25, limit=10)

    scores = {f.id: f for f in lent}
    assert scores["q"].rrf_score == pytest.approx(0.5 / 11) and scores["q"].fts_rank == 1
    assert scores["after"].rrf_score == pytest.approx(0.25 * 0.5 / 11)
    assert scores["after"].fts_rank is None and scores["after"].vector_rank is None
    assert [f.id for f in lent][:2] == ["q", "far"]  # ranked hits first; ties broken by id after them


def test_adjacent_hits_outrank_a_slightly_better_lone_hit_and_the_best_neighbour_counts_once():
    fused = reciprocal_rank_fusion(["lone", "a", "b", "c"], [], limit=10, k=10)

    lent = lend_to_neighbours(fused, {"lone": [], "a": ["b"], "b": ["a", "c"], "c": ["b"]}, weight=0.25, limit=3)

    assert [f.id for f in lent] == ["a", "b", "lone"]
    by_id = {f.id: f.rrf_score for f in lent}
    assert by_id["a"] == pytest.approx(0.5 / 12 + 0.25 * 0.5 / 13)
    assert by_id["b"] == pytest.approx(0.5 / 13 + 0.25 * 0.5 / 12)  # the better of its two neighbours, not both
