"""What a turn offers the model: the attached tools (built-in and custom), the request's client
tools, the agent's rules, and which calls wait for the client."""

from collections.abc import Sequence
from dataclasses import dataclass

from memvm.llm.types import ToolSpec
from memvm.memory.tool_rules import ToolRules
from memvm.messages.schemas import SendRequest
from memvm.orm import Agent, Tool
from memvm.runtime.loop.approvals import Waiting, client_specs
from memvm.runtime.loop.policy import RuleTrack
from memvm.runtime.tools.sandboxed import CustomTool
from memvm.tools import service as tools
from memvm.tools.builtin import BUILTIN_SPECS, HEARTBEAT_AGENT_TYPES, with_heartbeat


@dataclass(frozen=True)
class TurnTools:
    specs: list[ToolSpec]
    custom: dict[str, CustomTool]  # by name: run in the sandbox
    track: RuleTrack
    waiting: Waiting


def turn_tools(agent: Agent, attached: Sequence[Tool], request: SendRequest) -> TurnTools:
    custom = {tool.name: CustomTool.of(tool) for tool in attached if tool.tool_type == tools.CUSTOM_TOOL_TYPE}
    specs = [BUILTIN_SPECS[tool.name] if tool.name in BUILTIN_SPECS else custom[tool.name].spec for tool in attached]
    specs += client_specs(request, [tool.name for tool in attached])
    if agent.agent_type in HEARTBEAT_AGENT_TYPES:
        specs = [with_heartbeat(spec) for spec in specs]
    rules = ToolRules(agent.tool_rules)
    needs_approval = frozenset(
        tool.name for tool in attached if tool.default_requires_approval or rules.requires_approval(tool.name)
    )
    return TurnTools(
        specs=specs,
        custom=custom,
        track=RuleTrack(rules, [spec.name for spec in specs]),
        waiting=Waiting(needs_approval, frozenset(tool.name for tool in request.client_tools or ())),
    )
