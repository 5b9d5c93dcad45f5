"""What a turn offers the model: the attached tools (built-in, custom and MCP), the request's client
tools, the agent's rules, and which calls wait for the client."""

from collections.abc import Sequence
from dataclasses import dataclass

from memvm.llm.types import ToolSpec
from memvm.memory.tool_rules import ToolRules
from memvm.messages.schemas import SendRequest
from memvm.orm import Agent, Tool
from memvm.runtime.loop.approvals import Waiting, client_specs
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.policy import RuleTrack
from memvm.runtime.tools.mcp_calls import McpCalls, McpTool
from memvm.runtime.tools.sandboxed import CustomCalls, CustomTool, agent_state, wants_network
from memvm.tools import service as tools
from memvm.tools.builtin import BUILTIN_SPECS, HEARTBEAT_AGENT_TYPES, with_heartbeat


@dataclass(frozen=True)
class TurnTools:
    specs: list[ToolSpec]
    custom: dict[str, CustomTool]  # by name: run in the sandbox
    mcp: dict[str, McpTool]  # by name: run on their MCP server
    track: RuleTrack
    waiting: Waiting


def turn_tools(agent: Agent, attached: Sequence[Tool], request: SendRequest) -> TurnTools:
    custom = {tool.name: CustomTool.of(tool) for tool in attached if tool.tool_type == tools.CUSTOM_TOOL_TYPE}
    mcp = {tool.name: McpTool.of(tool) for tool in attached if tool.mcp_server_id is not None}
    own_specs = {name: tool.spec for name, tool in custom.items()} | {name: tool.spec for name, tool in mcp.items()}
    specs = [BUILTIN_SPECS[tool.name] if tool.name in BUILTIN_SPECS else own_specs[tool.name] for tool in attached]
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
        mcp=mcp,
        track=RuleTrack(rules, [spec.name for spec in specs]),
        waiting=Waiting(needs_approval, frozenset(tool.name for tool in request.client_tools or ())),
    )


def outside_calls(
    deps: RuntimeDeps, agent: Agent, custom: dict[str, CustomTool], mcp_tools: dict[str, McpTool], mcp: McpCalls | None
) -> CustomCalls:
    """The calls that run before a step's transaction: custom tools in the sandbox with the agent's
    secrets and network choice, MCP tools on their servers, and the web built-ins."""
    return CustomCalls(
        deps.sandbox,
        custom,
        env=agent.tool_secrets,
        network=wants_network(agent.metadata_),
        snapshot=lambda: agent_state(deps.sessionmaker, agent),
        web=deps.web_tools,
        mcp=mcp,
        mcp_tools=mcp_tools if mcp is not None else {},
    )
