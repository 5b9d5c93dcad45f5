"""Choosing what to evict when the context window fills up (pure)."""

from collections.abc import Sequence

# Compact when a request would use more than this share of the context window.
COMPACTION_TRIGGER = 0.9
# After compaction the kept tail of messages should fit in this share of the window.
KEEP_SHARE = 0.3


def over_budget(prompt_tokens: int, context_window: int) -> bool:
    return prompt_tokens > int(context_window * COMPACTION_TRIGGER)


def choose_cut(roles: Sequence[str], tokens: Sequence[int], keep_budget: int) -> int:
    """Index of the first message to keep: the longest tail within `keep_budget` tokens that does
    not start with a tool result (a tool call is never separated from its return). Returns 0 if
    nothing can be evicted, len(roles) if everything must go."""
    cut = len(roles)
    kept = 0
    for index in range(len(roles) - 1, -1, -1):
        kept += tokens[index]
        if kept > keep_budget:
            break
        cut = index
    while cut < len(roles) and roles[cut] == "tool":
        cut += 1
    return cut
