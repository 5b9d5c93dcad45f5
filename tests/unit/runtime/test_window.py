import pytest

from memvm.runtime.loop.window import choose_cut, over_budget


@pytest.mark.parametrize(
    ("roles", "tokens", "budget", "expected"),
    [
        (["user", "assistant", "user", "assistant"], [10, 10, 10, 10], 20, 2),
        (["user", "assistant", "tool", "assistant"], [10, 10, 10, 10], 20, 3),  # never start the tail on a tool result
        (["user", "assistant", "tool", "tool", "assistant"], [10, 10, 10, 10, 10], 30, 4),
        (["user", "assistant"], [10, 10], 100, 0),  # everything fits: nothing to evict
        (["user", "assistant"], [10, 50], 20, 2),  # the last message alone is too big: evict all
        ([], [], 10, 0),
    ],
)
def test_choose_cut_keeps_the_longest_tail_within_budget_without_splitting_tool_pairs(roles, tokens, budget, expected):
    assert choose_cut(roles, tokens, budget) == expected


def test_over_budget_triggers_past_ninety_percent():
    assert not over_budget(900, 1000)
    assert over_budget(901, 1000)
