"""POST /v1/agents/{id}/tools/{name}/run: one of the agent's attached tools, run with the client's
arguments the way a turn's step runs the model's call: a custom tool in the sandbox with the agent's
secrets (and its agent_state), a web built-in in the server, an MCP tool on its server, all before
any transaction; any other
built-in inside one transaction, with the embeddings it needs computed before it. Nothing is added
to the conversation: the answer is the outcome."""

import json
from typing import Any

from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.db.uow import transaction
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import NotFound
from memvm.ids import new_id
from memvm.llm.types import ToolCall
from memvm.prompts.service import recompiles_at_end
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.turn_tools import outside_calls
from memvm.runtime.tools.context import ToolContext
from memvm.runtime.tools.executor import execute
from memvm.runtime.tools.inputs import embed_tool_inputs
from memvm.runtime.tools.mcp_calls import McpTool, mcp_calls
from memvm.runtime.tools.outcome import ToolOutcome
from memvm.runtime.tools.sandboxed import CustomTool
from memvm.search.tuning import SearchTuning
from memvm.tools import service as tools


async def run_agent_tool(deps: RuntimeDeps, caller: Caller, agent_id: str, tool_name: str, args: dict[str, Any]) -> ToolOutcome:
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        agent = await agents.get_agent(session, agent_id)
        tool = next((tool for tool in await tools.agent_tools(session, agent_id) if tool.name == tool_name), None)
        if tool is None:
            raise NotFound(
                f"Tool {tool_name!r} is not attached to agent {agent_id!r}; attach it first (PATCH .../tools/attach/{{tool_id}})."
            )
        mcp = await mcp_calls(session, deps.mcp, deps.sessionmaker, [tool], deps.settings.mcp_call_timeout_seconds)
    call = ToolCall(new_id("toolcall"), tool_name, json.dumps(args))
    offered = frozenset({tool_name})
    custom = {tool.name: CustomTool.of(tool)} if tool.tool_type == tools.CUSTOM_TOOL_TYPE else {}
    mcp_tools = {tool.name: McpTool.of(tool)} if tool.mcp_server_id is not None else {}
    outside = await outside_calls(deps, agent, custom, mcp_tools, mcp).run([call], offered)
    if call.id in outside:
        return outside[call.id]
    inputs = await embed_tool_inputs(deps.embedders, deps.sessionmaker, agent, [call])
    embedding = EmbeddingModel.of(deps.embedders.for_handle(agent.embedding))
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        context = ToolContext(
            session,
            agent.id,
            caller.actor,
            timezone=agent.timezone,
            embedding=embedding,
            vectors=inputs.vectors,
            folder_vectors=inputs.folder_vectors,
            search=SearchTuning.of(deps.settings),
        )
        async with recompiles_at_end(session):
            return await execute(context, call, offered)
