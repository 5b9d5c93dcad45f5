"""Tool rules decided as a table: (rules, tools called so far, last output) → tools offered; and
the end-of-turn, required-before-exit, approval and prefilled-argument decisions."""

import pytest

from memvm.memory.tool_rules import ToolRules

TOOLS = ["search", "fetch", "summarize", "send_message", "notify"]

OFFERED = [
    # (name, rules, history, last output, offered)
    ("no rules: everything", [], [], None, TOOLS),
    ("run_first on the first step", [{"type": "run_first", "tool_name": "search"}], [], None, ["search"]),
    ("run_first later: no limit", [{"type": "run_first", "tool_name": "search"}], ["search"], None, TOOLS),
    (
        "two run_first tools",
        [{"type": "run_first", "tool_name": "fetch"}, {"type": "run_first", "tool_name": "search"}],
        [],
        None,
        ["search", "fetch"],
    ),
    (
        "children after the parent",
        [{"type": "constrain_child_tools", "tool_name": "search", "children": ["fetch", "summarize"]}],
        ["search"],
        None,
        ["fetch", "summarize"],
    ),
    (
        "children rule of another tool: no limit",
        [{"type": "constrain_child_tools", "tool_name": "search", "children": ["fetch"]}],
        ["fetch"],
        None,
        TOOLS,
    ),
    (
        "child not attached: nothing offered",
        [{"type": "constrain_child_tools", "tool_name": "search", "children": ["elsewhere"]}],
        ["search"],
        None,
        [],
    ),
    (
        "conditional: mapped output",
        [{"type": "conditional", "tool_name": "search", "child_output_mapping": {"found": "fetch", "none": "notify"}}],
        ["search"],
        "none",
        ["notify"],
    ),
    (
        "conditional: JSON true matches key True",
        [{"type": "conditional", "tool_name": "search", "child_output_mapping": {"True": "fetch"}}],
        ["search"],
        "true",
        ["fetch"],
    ),
    (
        "conditional: numbers match as values",
        [{"type": "conditional", "tool_name": "search", "child_output_mapping": {"3": "fetch"}}],
        ["search"],
        "3.0",
        ["fetch"],
    ),
    (
        "conditional: default child",
        [{"type": "conditional", "tool_name": "search", "child_output_mapping": {"x": "fetch"}, "default_child": "notify"}],
        ["search"],
        "y",
        ["notify"],
    ),
    (
        "conditional: unmapped, not required: everything",
        [{"type": "conditional", "tool_name": "search", "child_output_mapping": {"x": "fetch"}}],
        ["search"],
        "y",
        TOOLS,
    ),
    (
        "conditional: unmapped and required: nothing",
        [{"type": "conditional", "tool_name": "search", "child_output_mapping": {"x": "fetch"}, "require_output_mapping": True}],
        ["search"],
        "y",
        [],
    ),
    (
        "parent_last_tool: children hidden before the parent",
        [{"type": "parent_last_tool", "tool_name": "search", "children": ["fetch"]}],
        [],
        None,
        ["search", "summarize", "send_message", "notify"],
    ),
    (
        "parent_last_tool: children right after the parent",
        [{"type": "parent_last_tool", "tool_name": "search", "children": ["fetch"]}],
        ["search"],
        None,
        TOOLS,
    ),
    (
        "parent_last_tool: not two steps later",
        [{"type": "parent_last_tool", "tool_name": "search", "children": ["fetch"]}],
        ["search", "summarize"],
        None,
        ["search", "summarize", "send_message", "notify"],
    ),
    (
        "max_count: under the limit",
        [{"type": "max_count_per_step", "tool_name": "search", "max_count_limit": 2}],
        ["search"],
        None,
        TOOLS,
    ),
    (
        "max_count: at the limit",
        [{"type": "max_count_per_step", "tool_name": "search", "max_count_limit": 2}],
        ["search", "fetch", "search"],
        None,
        ["fetch", "summarize", "send_message", "notify"],
    ),
    (
        "rules combine: children minus the exhausted one",
        [
            {"type": "constrain_child_tools", "tool_name": "search", "children": ["search", "fetch"]},
            {"type": "max_count_per_step", "tool_name": "search", "max_count_limit": 1},
        ],
        ["search"],
        None,
        ["fetch"],
    ),
    (
        "terminal, continue, approval and required rules do not narrow",
        [
            {"type": "exit_loop", "tool_name": "send_message"},
            {"type": "continue_loop", "tool_name": "search"},
            {"type": "requires_approval", "tool_name": "notify"},
            {"type": "required_before_exit", "tool_name": "summarize"},
        ],
        [],
        None,
        TOOLS,
    ),
]


@pytest.mark.parametrize(
    ("rules", "history", "last_output", "offered"), [case[1:] for case in OFFERED], ids=[c[0] for c in OFFERED]
)
def test_offered(rules, history, last_output, offered):
    assert ToolRules(rules).offered(TOOLS, history, last_output) == offered


ENDS = [
    # (rules, tool, is a terminal built-in, stop reason)
    ([], "search", False, None),
    ([], "send_message", True, "end_turn"),
    ([{"type": "exit_loop", "tool_name": "search"}], "search", False, "tool_rule"),
    ([{"type": "continue_loop", "tool_name": "send_message"}], "send_message", True, None),
    ([{"type": "exit_loop", "tool_name": "fetch"}], "search", False, None),
]


@pytest.mark.parametrize(("rules", "name", "builtin_terminal", "reason"), ENDS)
def test_ends_turn(rules, name, builtin_terminal, reason):
    assert ToolRules(rules).ends_turn(name, builtin_terminal=builtin_terminal) == reason


def test_required_before_exit_lists_attached_uncalled_tools_in_order():
    rules = ToolRules(
        [
            {"type": "required_before_exit", "tool_name": "summarize"},
            {"type": "required_before_exit", "tool_name": "search"},
            {"type": "required_before_exit", "tool_name": "not_attached"},
        ]
    )

    assert rules.uncalled_required([], TOOLS) == ["search", "summarize"]
    assert rules.uncalled_required(["search"], TOOLS) == ["summarize"]
    assert rules.uncalled_required(["summarize", "search"], TOOLS) == []


def test_requires_approval_names_only_its_tools():
    rules = ToolRules([{"type": "requires_approval", "tool_name": "notify"}])

    assert rules.requires_approval("notify") and not rules.requires_approval("search")


def test_prefilled_arguments_from_run_first_and_child_arg_nodes():
    rules = ToolRules(
        [
            {"type": "run_first", "tool_name": "search", "args": {"query": "today"}},
            {
                "type": "constrain_child_tools",
                "tool_name": "search",
                "children": ["fetch", "notify"],
                "child_arg_nodes": [{"name": "fetch", "args": {"limit": 3}}],
            },
        ]
    )

    assert rules.prefilled("search", []) == {"query": "today"}
    assert rules.prefilled("search", ["fetch"]) == {}
    assert rules.prefilled("fetch", ["search"]) == {"limit": 3}
    assert rules.prefilled("notify", ["search"]) == {}
