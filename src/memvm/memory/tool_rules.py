"""Letta's tool rules, decided (pure): which tools the model is offered at each step of a turn,
which calls end the turn or must happen before it may end, which need a human's approval, and the
arguments a rule fills in. Rules arrive as validated dicts of the SDK's shapes (`type` names them):

  run_first             the first step of a turn offers only these tools
  exit_loop             calling the tool ends the turn (stop reason `tool_rule`)
  continue_loop         calling the tool never ends the turn
  constrain_child_tools after the tool, only its `children` are offered
  conditional           after the tool, its output picks the next tool from `child_output_mapping`
  parent_last_tool      the `children` are offered only right after the tool
  max_count_per_step    the tool is offered at most `max_count_limit` times in a turn
  required_before_exit  the turn cannot end before the tool was called
  requires_approval     a call waits for a human's approval

The history a decision reads is the names of the tools called so far in this turn, in order.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Rule = Mapping[str, Any]


@dataclass(frozen=True)
class ToolRules:
    rules: Sequence[Rule] = field(default_factory=tuple)

    def _of(self, kind: str) -> list[Rule]:
        return [rule for rule in self.rules if rule.get("type") == kind]

    def _names(self, kind: str) -> set[str]:
        return {rule["tool_name"] for rule in self._of(kind)}

    def offered(self, available: Sequence[str], history: Sequence[str], last_output: str | None) -> list[str]:
        """The tools the model may call at this step, in the order they are attached. Every rule
        narrows the set; none widens it past what is attached."""
        allowed = set(available)
        first = self._names("run_first")
        if not history and first:
            allowed &= first
        last = history[-1] if history else None
        for rule in self._of("constrain_child_tools"):
            if rule["tool_name"] == last:
                allowed &= set(rule["children"])
        for rule in self._of("conditional"):
            if rule["tool_name"] == last:
                allowed &= _conditional_children(rule, last_output, allowed)
        for rule in self._of("parent_last_tool"):
            if rule["tool_name"] != last:
                allowed -= set(rule["children"])
        for rule in self._of("max_count_per_step"):
            if history.count(rule["tool_name"]) >= rule["max_count_limit"]:
                allowed.discard(rule["tool_name"])
        return [name for name in available if name in allowed]

    def ends_turn(self, name: str, *, builtin_terminal: bool) -> str | None:
        """The stop reason calling `name` ends the turn with, or None. A continue_loop rule keeps
        even a terminal built-in (send_message) going."""
        if name in self._names("continue_loop"):
            return None
        if name in self._names("exit_loop"):
            return "tool_rule"
        return "end_turn" if builtin_terminal else None

    def uncalled_required(self, history: Sequence[str], available: Sequence[str]) -> list[str]:
        """Attached required_before_exit tools not called yet in this turn."""
        required = self._names("required_before_exit")
        return [name for name in available if name in required and name not in history]

    def requires_approval(self, name: str) -> bool:
        return name in self._names("requires_approval")

    def prefilled(self, name: str, history: Sequence[str]) -> dict[str, Any]:
        """Arguments a rule fixes for this call (they override the model's): a run_first rule's
        `args` on the first step, a parent's `child_arg_nodes` right after it."""
        if not history:
            for rule in self._of("run_first"):
                if rule["tool_name"] == name and rule.get("args"):
                    return dict(rule["args"])
            return {}
        for rule in self._of("constrain_child_tools"):
            if rule["tool_name"] == history[-1]:
                for node in rule.get("child_arg_nodes") or ():
                    if node["name"] == name and node.get("args"):
                        return dict(node["args"])
        return {}


def _conditional_children(rule: Rule, output: str | None, allowed: set[str]) -> set[str]:
    """The child mapped to the tool's output, else the default child, else (unless a mapping is
    required, which offers nothing) every tool."""
    for key, child in rule["child_output_mapping"].items():
        if _matches(output, key):
            return {child}
    if rule.get("default_child"):
        return {rule["default_child"]}
    return set() if rule.get("require_output_mapping") else set(allowed)


def _matches(output: str | None, key: str) -> bool:
    """Outputs are text; a key matches it as text, or as the same JSON value ("true" matches True,
    "3" matches 3.0), case-insensitively for true/false."""
    if output is None:
        return False
    text = output.strip()
    if text == key or (key.lower() in ("true", "false") and text.lower() == key.lower()):
        return True
    try:
        return bool(json.loads(output) == json.loads(key))
    except (ValueError, TypeError):
        return False
