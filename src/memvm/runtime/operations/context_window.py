"""Operations on an agent's context window outside a turn: inspect, compact, reset.
Compaction and reset take the turn lock, so they never interleave with a running turn."""

import json
from typing import Any

from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.conversations import service as conversations
from memvm.conversations.thread import ThreadRef
from memvm.db.uow import transaction
from memvm.errors import Conflict, InvalidInput
from memvm.memory.compiler import RenderMode, render_blocks
from memvm.messages import service as messages
from memvm.orm import Agent
from memvm.prompts.service import block_views, blocks_in_prompt_order, memory_stats
from memvm.runtime.loop.compaction import CompactionError, compact
from memvm.runtime.loop.conversation import to_chat
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.models import context_window_of, resolve_model
from memvm.runtime.loop.tokens import estimate_message, estimate_text, estimate_tools
from memvm.tools import service as tools
from memvm.tools.builtin import BUILTIN_SPECS


async def reset_messages(deps: RuntimeDeps, caller: Caller, agent_id: str) -> Agent:
    """Empty the context window; the history stays stored and searchable. Tool calls waiting for
    the client are abandoned with the window they were in."""
    async with (
        deps.turn_lock(caller.organization_id, agent_id),
        transaction(deps.sessionmaker, caller.organization_id) as session,
    ):
        agent = await agents.get_agent(session, agent_id)
        await messages.reset_context(session, agent_id)
        if agent.pending_approval is not None:
            await agents.set_pending_approval(session, agent, None)
    return agent


async def summarize(deps: RuntimeDeps, caller: Caller, ref: ThreadRef) -> dict[str, Any]:
    """Compact a conversation's whole window into one summary now (the SDK's messages.compact)."""
    async with deps.turn_lock(caller.organization_id, ref.lock_key):
        async with transaction(deps.sessionmaker, caller.organization_id) as session:
            thread = await conversations.open_thread(session, ref, for_write=True)
        if thread.pending_approval is not None:  # compacting could evict the calls the answer pairs with
            raise Conflict(f"In {thread.name}, the agent is waiting for an answer to tool calls; answer them before compacting.")
        agent_model = resolve_model(thread.agent, deps.models, deps.settings, thread.conversation)
        try:
            result = await compact(deps.sessionmaker, caller.organization_id, thread, agent_model, force=True)
        except CompactionError as error:
            raise InvalidInput(str(error)) from error
    if result is None:
        raise InvalidInput(f"{thread.name.capitalize()} has no messages in its context window; there is nothing to summarize.")
    return {"summary": result.summary, "num_messages_before": result.messages_before, "num_messages_after": result.messages_after}


async def context_overview(deps: RuntimeDeps, caller: Caller, agent_id: str) -> dict[str, Any]:
    """Token breakdown of what the model would receive now (estimates: ~4 characters per token)."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        agent = await agents.get_agent(session, agent_id)
        blocks = (await blocks_in_prompt_order(session, [agent_id]))[agent_id]
        window = await messages.in_context(session, agent_id)
        specs = [BUILTIN_SPECS[t.name] for t in await tools.agent_tools(session, agent_id) if t.name in BUILTIN_SPECS]
        [stats] = (await memory_stats(session, [agent_id])).values()
        unembedded = await messages.pending_embeddings(session, agent_id)
    core_memory = render_blocks(block_views(blocks), RenderMode(agent.memory_render_mode))
    summary = [m for m in window if m.kind == "summary"]
    recent = [m for m in window if m.kind != "summary"]
    parts = {
        "system": estimate_text(agent.compiled_system) - estimate_text(core_memory),
        "core_memory": estimate_text(core_memory),
        "functions_definitions": estimate_tools(specs),
        "summary_memory": sum(estimate_message(to_chat(m)) for m in summary),
        "messages": sum(estimate_message(to_chat(m)) for m in recent),
    }
    window_size = context_window_of(agent, deps.settings)
    return {
        "context_window_size_max": window_size,
        "context_window_size_current": sum(parts.values()),
        "num_messages": len(window),
        "num_archival_memory": stats.archival_passages,
        "num_messages_pending_embedding": unembedded,
        "num_recall_memory": stats.recall_messages,
        "num_tokens_system": parts["system"],
        "system_prompt": agent.compiled_system,
        "num_tokens_core_memory": parts["core_memory"],
        "core_memory": core_memory,
        "num_tokens_functions_definitions": parts["functions_definitions"],
        "functions_definitions": [
            json.loads(json.dumps({"name": s.name, "description": s.description, "parameters": s.parameters})) for s in specs
        ],
        "num_tokens_summary_memory": parts["summary_memory"],
        "summary_memory": summary[0].content if summary else None,
        "num_tokens_messages": parts["messages"],
        "messages": [],
        "num_tokens_external_memory_summary": 0,
        "external_memory_summary": "",
    }
