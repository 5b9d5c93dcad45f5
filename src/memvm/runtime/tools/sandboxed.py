"""Custom tools: their calls run in the sandbox before the step's transaction opens (a call may
take seconds, and no transaction or row lock is held meanwhile), and so do the web built-ins'
(runtime/tools/web.py), in the server, and MCP servers' tools (runtime/tools/mcp_calls.py); the
step then stores their
outcomes with everything else. Calls run one after another, in the order the model made them."""

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.agents import service as agents
from memvm.db.uow import transaction
from memvm.errors import InvalidInput, Unavailable
from memvm.llm.types import ToolCall, ToolSpec
from memvm.orm import Agent, Tool
from memvm.runtime.tools.arguments import check_names, parse_arguments
from memvm.runtime.tools.mcp_calls import McpCalls, McpTool
from memvm.runtime.tools.outcome import ToolOutcome, clip
from memvm.runtime.tools.web import WebTools
from memvm.sandbox.calls import ToolRun, ToolRunResult
from memvm.sandbox.runner import Sandbox
from memvm.tools.builtin import WEB_TOOLS
from memvm.tools.source_schema import derive_schema, takes_agent_state

Snapshot = Callable[[], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class CustomTool:
    """What a turn needs of an attached custom tool."""

    name: str
    source: str
    spec: ToolSpec
    return_char_limit: int
    takes_agent_state: bool
    network: bool
    requirements: tuple[str, ...]

    @classmethod
    def of(cls, tool: Tool) -> "CustomTool":
        schema = tool.json_schema
        return cls(
            name=tool.name,
            source=tool.source_code or "",
            spec=ToolSpec(tool.name, schema.get("description") or tool.description, schema.get("parameters") or {}),
            return_char_limit=tool.return_char_limit,
            takes_agent_state=takes_agent_state(tool.source_code or "", tool.name),
            network=wants_network(tool.metadata_),
            requirements=pip_specifiers(tool.pip_requirements),
        )


def pip_specifiers(requirements: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Letta's {"name", "version"} entries as pip specifiers, a version pinned with ==."""
    return tuple(f"{r['name']}=={r['version']}" if r.get("version") else str(r["name"]) for r in requirements)


def wants_network(metadata: Mapping[str, Any] | None) -> bool:
    """A tool or an agent opts in to the network with metadata {"sandbox": {"network": true}}."""
    sandbox = (metadata or {}).get("sandbox")
    return isinstance(sandbox, dict) and sandbox.get("network") is True


async def agent_state(sessionmaker: async_sessionmaker[AsyncSession], agent: Agent) -> dict[str, Any]:
    """The agent as its custom tools see it (`agent_state`): read when a call first needs it, so it
    shows this turn's memory edits so far."""
    async with transaction(sessionmaker, agent.organization_id) as session:
        blocks = await agents.agent_blocks(session, agent.id)
    return {
        "id": agent.id,
        "name": agent.name,
        "agent_type": agent.agent_type,
        "tags": list(agent.tags),
        "metadata": dict(agent.metadata_),
        "blocks": [
            {"label": b.label, "value": b.value, "limit": b.char_limit, "description": b.description, "read_only": b.read_only}
            for b in blocks
        ],
    }


@dataclass(frozen=True)
class CustomCalls:
    sandbox: Sandbox
    tools: Mapping[str, CustomTool]
    env: Mapping[str, str]
    network: bool  # the agent opted in for all its tools
    snapshot: Snapshot  # the agent as its tools see it (`agent_state`), read when first needed
    web: WebTools  # the built-ins that reach the network run here too, outside the transaction
    mcp: McpCalls | None = None  # and so do MCP servers' tools
    mcp_tools: Mapping[str, McpTool] = dataclasses.field(default_factory=dict)

    async def run(self, calls: Sequence[ToolCall], offered: frozenset[str]) -> dict[str, ToolOutcome]:
        """Outcomes by tool call id, for the calls of custom, MCP and web tools offered this step."""
        outcomes: dict[str, ToolOutcome] = {}
        agent_state: dict[str, Any] | None = None
        for call in calls:
            tool = self.tools.get(call.name)
            if call.name not in offered:
                continue
            if tool is None:
                if call.name in WEB_TOOLS:
                    outcomes[call.id] = await self.web.run(call)
                elif self.mcp is not None and (mcp_tool := self.mcp_tools.get(call.name)) is not None:
                    outcomes[call.id] = await self.mcp.run(mcp_tool, call)
                continue
            if tool.takes_agent_state and agent_state is None:
                agent_state = await self.snapshot()
            outcomes[call.id] = await self._run_one(tool, call, agent_state)
        return outcomes

    async def _run_one(self, tool: CustomTool, call: ToolCall, agent_state: dict[str, Any] | None) -> ToolOutcome:
        try:
            arguments = parse_arguments(call)
            heartbeat = bool(arguments.pop("request_heartbeat", False))
            parameters = tool.spec.parameters
            check_names(call.name, arguments, (parameters.get("properties") or {}), parameters.get("required") or ())
        except ValueError as error:
            return ToolOutcome.invalid(str(error))
        if self.sandbox.unavailable is not None:
            unavailable = f"Custom tools cannot run on this server: {self.sandbox.unavailable}."
            return ToolOutcome("error", unavailable, heartbeat=heartbeat)
        result = await self.sandbox.run(
            ToolRun(
                source=tool.source,
                function=tool.name,
                arguments=arguments,
                env=self.env,
                agent_state=agent_state if tool.takes_agent_state else None,
                network=self.network or tool.network,
                requirements=tool.requirements,
            )
        )
        return ToolOutcome(
            result.status,
            clip(result.value, tool.return_char_limit),
            heartbeat=heartbeat,
            stdout=result.stdout or None,
            stderr=result.stderr or None,
        )


async def run_source(
    sandbox: Sandbox,
    source: str,
    arguments: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    return_char_limit: int,
    requirements: tuple[str, ...] = (),
    name: str | None = None,
) -> ToolRunResult:
    """Run a tool's source once, outside any agent (POST /v1/tools/run): the same checks and the same
    sandbox as an agent's call; a tool that takes `agent_state` gets an empty one."""
    schema = derive_schema(source, name)
    parameters = schema["parameters"]
    try:
        check_names(schema["name"], dict(arguments), parameters["properties"], parameters["required"])
    except ValueError as error:
        raise InvalidInput(str(error)) from None
    if sandbox.unavailable is not None:
        raise Unavailable(f"Custom tools cannot run on this server: {sandbox.unavailable}.")
    wants_state = takes_agent_state(source, schema["name"])
    run = ToolRun(source, schema["name"], arguments, env=env, agent_state={} if wants_state else None, requirements=requirements)
    result = await sandbox.run(run)
    return dataclasses.replace(result, value=clip(result.value, return_char_limit))
