"""Tool rules as the Letta SDK sends them (`tool_rules` on agent create and update): one shape per
`type`, checked here so that a bad rule is a 400 naming it. memory/tool_rules.py decides with them."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Rule(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tool_name: str = Field(min_length=1)
    prompt_template: str | None = Field(None, description="Accepted and ignored, as in Letta.")


class InitToolRule(_Rule):
    type: Literal["run_first"] = "run_first"
    args: dict[str, Any] | None = Field(None, description="Arguments that override the model's.")


class TerminalToolRule(_Rule):
    type: Literal["exit_loop"] = "exit_loop"


class ContinueToolRule(_Rule):
    type: Literal["continue_loop"] = "continue_loop"


class ChildArgNode(BaseModel):
    name: str
    args: dict[str, Any] | None = None


class ChildToolRule(_Rule):
    type: Literal["constrain_child_tools"] = "constrain_child_tools"
    children: list[str]
    child_arg_nodes: list[ChildArgNode] | None = None

    @model_validator(mode="after")
    def _nodes_are_children(self) -> "ChildToolRule":
        strangers = [node.name for node in self.child_arg_nodes or () if node.name not in self.children]
        if strangers:
            raise ValueError(f"child_arg_nodes name tools that are not children of {self.tool_name}: {', '.join(strangers)}")
        return self


class ConditionalToolRule(_Rule):
    type: Literal["conditional"] = "conditional"
    child_output_mapping: dict[str, str]
    default_child: str | None = None
    require_output_mapping: bool = False


class ParentToolRule(_Rule):
    type: Literal["parent_last_tool"] = "parent_last_tool"
    children: list[str]


class MaxCountPerStepToolRule(_Rule):
    type: Literal["max_count_per_step"] = "max_count_per_step"
    max_count_limit: int = Field(ge=1)


class RequiredBeforeExitToolRule(_Rule):
    type: Literal["required_before_exit"] = "required_before_exit"


class RequiresApprovalToolRule(_Rule):
    type: Literal["requires_approval"] = "requires_approval"


ToolRule = Annotated[
    InitToolRule
    | TerminalToolRule
    | ContinueToolRule
    | ChildToolRule
    | ConditionalToolRule
    | ParentToolRule
    | MaxCountPerStepToolRule
    | RequiredBeforeExitToolRule
    | RequiresApprovalToolRule,
    Field(discriminator="type"),
]


def named_tools(rules: list[ToolRule]) -> list[str]:
    """Every tool a rule names, so the service can check they exist."""
    names: list[str] = []
    for rule in rules:
        names.append(rule.tool_name)
        names += getattr(rule, "children", [])
        if isinstance(rule, ConditionalToolRule):
            names += [*rule.child_output_mapping.values(), *([rule.default_child] if rule.default_child else [])]
    return list(dict.fromkeys(names))
