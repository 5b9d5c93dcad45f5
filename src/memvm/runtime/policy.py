"""When a turn continues and why it stops (pure)."""

from collections.abc import Sequence

from memvm.llm.types import Completion
from memvm.runtime.tools.outcome import ToolOutcome
from memvm.tools.builtin import HEARTBEAT_AGENT_TYPES

# After this many consecutive steps whose calls were all malformed, stop instead of looping.
INVALID_CALL_STREAK_LIMIT = 3


def stop_reason(agent_type: str, completion: Completion, outcomes: Sequence[ToolOutcome], invalid_streak: int) -> str | None:
    """None means take another step; otherwise the Letta stop reason for the turn."""
    if not completion.tool_calls:
        if completion.finish_reason == "length":
            return "max_tokens_exceeded"
        return "no_tool_call" if agent_type in HEARTBEAT_AGENT_TYPES else "end_turn"
    if invalid_streak >= INVALID_CALL_STREAK_LIMIT:
        return "invalid_tool_call"
    if any(outcome.terminal for outcome in outcomes):
        return "end_turn"
    return None


def heartbeat_reason(outcomes: Sequence[ToolOutcome]) -> str:
    """The text of the heartbeat message a MemGPT-style agent gets when control returns to it."""
    if any(outcome.status == "error" for outcome in outcomes):
        return "Function call failed, returning control."
    if any(outcome.heartbeat for outcome in outcomes):
        return "Function called using request_heartbeat=true, returning control."
    return "Function call finished, returning control."
