"""When a turn continues and why it stops, with the agent's tool rules (pure)."""

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from memvm.llm.types import Completion
from memvm.memory.tool_rules import ToolRules
from memvm.runtime.tools.outcome import ToolOutcome
from memvm.tools.builtin import HEARTBEAT_AGENT_TYPES

# After this many consecutive steps whose calls were all malformed, stop instead of looping.
INVALID_CALL_STREAK_LIMIT = 3


@dataclass(frozen=True)
class StepEnd:
    """Marks the end of a step inside the turn's event stream: stop (with a reason) or go on."""

    stop_reason: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Continuation:
    stop_reason: str | None  # None: take another step
    nudge: str | None = None  # why the model must go on (a rule it broke), shown to it as a heartbeat


@dataclass
class RuleTrack:
    """The tool rules over one turn: what was called so far, and what that allows next."""

    rules: ToolRules
    attached: list[str]  # tool names in attachment order
    called: list[str] = field(default_factory=list)
    last_output: str | None = None

    def offered(self) -> list[str]:
        return self.rules.offered(self.attached, self.called, self.last_output)

    def prefill(self, completion: Completion) -> Completion:
        """The model's calls with the arguments rules fix (run_first args, child_arg_nodes)."""
        calls = []
        for call in completion.tool_calls:
            fixed = self.rules.prefilled(call.name, self.called)
            if fixed:
                try:
                    arguments = {**json.loads(call.arguments or "{}"), **fixed}
                    call = dataclasses.replace(call, arguments=json.dumps(arguments, ensure_ascii=False))
                except (ValueError, TypeError):
                    pass  # malformed arguments: the executor reports them as they are
            calls.append(call)
        return dataclasses.replace(completion, tool_calls=tuple(calls))

    def record(self, completion: Completion, outcomes: Sequence[ToolOutcome]) -> None:
        for call, outcome in zip(completion.tool_calls, outcomes, strict=True):
            if not outcome.invalid_call:
                self.called.append(call.name)
                self.last_output = outcome.message

    def decide(
        self, agent_type: str, completion: Completion, outcomes: Sequence[ToolOutcome], invalid_streak: int
    ) -> Continuation:
        """Whether the turn stops after this step (record the step first)."""
        if not completion.tool_calls:
            if completion.finish_reason == "length":
                return Continuation("max_tokens_exceeded")
            return self._unless_required(Continuation("no_tool_call" if agent_type in HEARTBEAT_AGENT_TYPES else "end_turn"))
        if invalid_streak >= INVALID_CALL_STREAK_LIMIT:
            return Continuation("invalid_tool_call")
        for call, outcome in zip(completion.tool_calls, outcomes, strict=True):
            reason = None if outcome.invalid_call else self.rules.ends_turn(call.name, builtin_terminal=outcome.terminal)
            if reason is not None:
                return self._unless_required(Continuation(reason))
        return Continuation(None)

    def _unless_required(self, stop: Continuation) -> Continuation:
        missing = self.rules.uncalled_required(self.called, self.attached)
        if not missing:
            return stop
        return Continuation(None, f"ToolRuleViolated: You must call {', '.join(missing)} at least once to exit the loop.")


def heartbeat_reason(outcomes: Sequence[ToolOutcome]) -> str:
    """The text of the heartbeat message a MemGPT-style agent gets when control returns to it."""
    if any(outcome.status == "error" for outcome in outcomes):
        return "Function call failed, returning control."
    if any(outcome.heartbeat for outcome in outcomes):
        return "Function called using request_heartbeat=true, returning control."
    return "Function call finished, returning control."
