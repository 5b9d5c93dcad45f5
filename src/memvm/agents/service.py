"""Agent lifecycle and block attachment. Every prompt-affecting change recompiles the stored
system prompt in the same transaction."""

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.agents import block_links, repository
from memvm.agents.schemas import AgentCreate, AgentFields, AgentUpdate
from memvm.agents.tool_rules import ToolRule, named_tools
from memvm.agents.views import AgentWithBlocks, Links, NewAgent
from memvm.archives import service as archives
from memvm.blocks import service as blocks
from memvm.db.conflicts import conflict_on
from memvm.db.pagination import PageRequest, fetch_page
from memvm.embeddings.registry import DEFAULT_EMBEDDING_HANDLE
from memvm.errors import Conflict, InvalidInput, NotFound
from memvm.files import service as files
from memvm.files import views
from memvm.identities import service as identities
from memvm.ids import new_id
from memvm.memory.compiler import RenderMode
from memvm.messages import service as messages
from memvm.orm import Agent, Block, Tool
from memvm.prompts.service import (
    DEFAULT_SYSTEM_PROMPT,
    LockedAgent,
    blocks_in_prompt_order,
    compile_new_agent,
    lock_for_recompile,
    preview_prompt,
    recompile_agents,
    recompile_locked,
    show_stored,
)
from memvm.tools import service as tools

_HANDLE = re.compile(r"[^/\s]+/\S+")
_SIMPLE_FIELDS = (
    "name",
    "description",
    "system",
    "tags",
    "model",
    "embedding",
    "embedding_config",
    "context_window_limit",
    "timezone",
    "message_buffer_autoclear",
    "max_files_open",
    "per_file_view_window_char_limit",
)
_PROMPT_FIELDS = frozenset({"system", "memory_render_mode", "timezone"})
# What the agent's file limits follow (its own, or the defaults of its context window).
_FILE_LIMIT_FIELDS = frozenset({"max_files_open", "per_file_view_window_char_limit", "context_window_limit", "llm_config"})


async def create_agent(session: AsyncSession, data: AgentCreate, *, actor: Actor) -> NewAgent:
    """Create the agent with its new and existing blocks; fails whole on any bad block."""
    check_handles(data)
    if folder_ids := data.chosen_folder_ids():
        await files.lock_folders(session, folder_ids)  # first, in the lock order of files/service.py
    existing = await block_links.locked_blocks(session, data.block_ids)
    block_links.check_unique_labels([*(spec.label for spec in data.memory_blocks), *(block.label for block in existing)])
    agent_id = new_id("agent")
    agent = Agent(
        id=agent_id,
        name=data.name or f"agent_{agent_id[6:14]}",
        description=data.description,
        agent_type=data.agent_type,
        system=data.system if data.system is not None else DEFAULT_SYSTEM_PROMPT,
        memory_render_mode=(data.memory_render_mode or RenderMode.STANDARD).value,
        tags=data.tags or [],
        metadata_=data.metadata or {},
        model=data.model,
        embedding=data.embedding,
        llm_config=data.llm_config.model_dump() if data.llm_config else None,
        embedding_config=data.embedding_config,
        context_window_limit=data.context_window_limit,
        timezone=data.timezone or "UTC",
        tool_secrets=data.secrets or {},
        tool_rules=await _checked_rules(session, data.tool_rules or []),
        # Letta forces it on for workflow agents.
        message_buffer_autoclear=bool(data.message_buffer_autoclear) or data.agent_type == "workflow_agent",
        max_files_open=data.max_files_open,
        per_file_view_window_char_limit=data.per_file_view_window_char_limit,
    )
    created = [blocks.new_block(spec) for spec in data.memory_blocks]  # all checked before anything is stored
    compile_new_agent(agent, [*created, *existing])  # stored with its row: no recompile to lock and re-read it
    tool_names = _initial_tool_names(data)
    # The row, the new blocks, their history, every attachment and the tools' links in one statement,
    # which has PostgreSQL number the attachments (`position`, an identity) in the order given, so the
    # prompt keeps it. The rows stay out of the session: nothing else in this unit of work reads them.
    stored = await repository.insert_new(
        session,
        {
            **repository.new_agent_parameters(agent),
            **blocks.new_block_parameters(session, created, actor=actor, attach_to=agent_id, attached=existing),
            **tools.chosen_link_parameters(session, agent_id, tool_names, data.tool_ids),
        },
    )
    agent.created_at, agent.updated_at = stored.created_at, stored.updated_at
    for block in created:
        block.created_at, block.updated_at = stored.block_times[block.id]
    chosen_tools = tools.check_chosen(tool_names, data.tool_ids, stored.tools)
    if folder_ids:
        await files.set_folders(session, agent_id, folder_ids)  # after the tools: the file tools come with them
        # Its prompt lists the folders' files; the recompile stamps the row again.
        [prompt] = await recompile_agents(session, [agent_id])
        show_stored(agent, prompt)
    if data.identity_ids:
        await identities.set_agent_identities(session, agent_id, data.identity_ids)
    return NewAgent(agent, [*created, *existing], chosen_tools)


def _initial_tool_names(data: AgentCreate) -> list[str]:
    names = [*(tools.default_tool_names(data.agent_type) if data.include_base_tools else ()), *data.tools]
    return list(dict.fromkeys(names))


async def _checked_rules(session: AsyncSession, rules: list[ToolRule]) -> list[dict[str, Any]]:
    """Rules as stored; every tool they name must exist (attached or not: it may be attached later)."""
    await tools.tools_by_name(session, named_tools(rules))
    return [rule.model_dump(exclude_none=True) for rule in rules]


async def set_pending_approval(session: AsyncSession, agent: Agent, pending: dict[str, Any] | None) -> None:
    """Record (or clear) the tool calls a stopped turn waits on; `agent` (possibly loaded in another
    session) is updated to match."""
    await repository.set_pending_approval(session, agent.id, pending)
    agent.pending_approval = pending


async def set_requires_approval(session: AsyncSession, agent_id: str, tool_name: str, *, required: bool) -> Agent:
    """Add or drop the agent's requires_approval rule for one tool (Letta's approval toggle)."""
    agent = await get_agent(session, agent_id, lock=True)
    await tools.tools_by_name(session, [tool_name])
    kept = [
        rule for rule in agent.tool_rules if not (rule.get("type") == "requires_approval" and rule.get("tool_name") == tool_name)
    ]
    agent.tool_rules = [*kept, *([{"type": "requires_approval", "tool_name": tool_name}] if required else [])]
    await session.flush()
    return agent


async def model_handles(session: AsyncSession) -> list[str]:
    """The model handles the organization's agents use."""
    return await repository.model_handles(session)


def agent_not_found(agent_id: str) -> NotFound:
    return NotFound(f"Agent {agent_id!r} not found.")


async def get_agent(session: AsyncSession, agent_id: str, *, lock: bool = False) -> Agent:
    agent = await repository.get(session, agent_id, lock=lock)
    if agent is None:
        raise agent_not_found(agent_id)
    return agent


async def embedding_of(session: AsyncSession, agent_id: str) -> str | None:
    """The agent's embedding model handle (None: the server's default), without reading the rest of it."""
    row = await repository.embedding_of(session, agent_id)
    if row is None:
        raise agent_not_found(agent_id)
    return row[0]


async def get_agent_to_describe(session: AsyncSession, agent_id: str) -> AgentWithBlocks:
    """The agent, with which relations it has that its view would read, and its blocks in prompt
    order, in one statement."""
    rows = await repository.get_with_links_and_blocks(session, agent_id)
    if not rows:
        raise agent_not_found(agent_id)
    return AgentWithBlocks(rows[0][0], [block for _, block in rows if block is not None])


async def list_agents(
    session: AsyncSession,
    page: PageRequest,
    *,
    name: str | None = None,
    query_text: str | None = None,
    tags: Sequence[str] = (),
    match_all_tags: bool = False,
    among: Select[tuple[str]] | None = None,
) -> list[Agent]:
    """`among`: only agents whose ids this query selects (those of an identity)."""
    query = repository.list_query(name=name, query_text=query_text, tags=tags, match_all_tags=match_all_tags, among=among)
    return await fetch_page(session, query, Agent, page)


async def agents_of_block(session: AsyncSession, block_id: str, page: PageRequest) -> list[Agent]:
    await blocks.get_block(session, block_id)
    return await fetch_page(session, repository.agents_of_block_query(block_id), Agent, page)


async def update_agent(session: AsyncSession, agent_id: str, update: AgentUpdate) -> Agent:
    check_handles(update)
    changes = update.model_dump(exclude_unset=True, exclude_none=True)
    new_blocks = await block_links.locked_blocks(session, update.block_ids) if update.block_ids is not None else None
    refit_files = bool(_FILE_LIMIT_FIELDS & changes.keys())
    folder_ids = update.chosen_folder_ids()
    if folder_ids is not None:  # the lock order of files/service.py: folders, files lock, agent row
        await files.lock_folders(session, folder_ids, attached_to=agent_id)
    elif refit_files:
        await views.lock_files(session, agent_id)
    if update.identity_ids is not None:  # the lock order of identities/service.py: identities, then the agent row
        await identities.lock_identities(session, update.identity_ids)
    agent = await get_agent(session, agent_id, lock=True)
    old_embedding = embedding_handle(agent.embedding)
    for field in _SIMPLE_FIELDS:
        if field in changes:
            setattr(agent, field, changes[field])
    if embedding_handle(agent.embedding) == old_embedding:
        changes.pop("embedding", None)
    if "metadata" in changes:
        agent.metadata_ = changes["metadata"]
    if update.secrets is not None:
        agent.tool_secrets = update.secrets
    if update.tool_rules is not None:
        agent.tool_rules = await _checked_rules(session, update.tool_rules)
    if update.llm_config is not None:
        agent.llm_config = update.llm_config.model_dump()
    if update.memory_render_mode is not None:
        agent.memory_render_mode = update.memory_render_mode.value
    if new_blocks is not None:
        await block_links.replace_blocks(session, agent, new_blocks)
    if "embedding" in changes:
        await _change_embedding_model(session, agent)
    if folder_ids is not None:
        await files.set_folders(session, agent.id, folder_ids)  # recompiles
    if update.identity_ids is not None:
        await identities.set_agent_identities(session, agent.id, update.identity_ids)
    await session.flush()
    if refit_files:
        await views.refit(session, agent.id)  # recompiles
    elif new_blocks is not None or _PROMPT_FIELDS & changes.keys():
        await recompile_agents(session, [agent.id])
    return agent


def check_handles(fields: AgentFields) -> None:
    """A malformed model or embedding handle is a 400 (InvalidInput), as Letta answers it."""
    for name in ("model", "embedding"):
        value = getattr(fields, name)
        if value is not None and not _HANDLE.fullmatch(value):
            raise InvalidInput(f"{name} {value!r} is not a handle: use 'provider/model-name', e.g. 'openai/gpt-4o-mini'.")


def embedding_handle(handle: str | None) -> str:
    """Handles compare case-insensitively; no handle means the server's default model."""
    return (handle or DEFAULT_EMBEDDING_HANDLE).lower()


async def _change_embedding_model(session: AsyncSession, agent: Agent) -> None:
    """Switching models is explicit: archives of the old model are refused (their vectors cannot be
    compared with the new model's), and the agent's messages are queued to be re-embedded."""
    new = embedding_handle(agent.embedding)
    mismatched = [a for a in await archives.archives_of(session, agent.id) if a.embedding_model.lower() != new]
    if mismatched:
        raise Conflict(
            f"Agent {agent.id!r} reads archive {mismatched[0].id!r} embedded with {mismatched[0].embedding_model!r}; "
            f"its vectors cannot be searched with {agent.embedding!r}. Detach the archive (or keep the old embedding) first."
        )
    await messages.queue_reembedding(session, agent.id)


async def delete_agent(session: AsyncSession, agent_id: str) -> None:
    """Delete the agent; its blocks survive (they may be shared) and stay listed under /v1/blocks."""
    await files.lock_folders(session, [], attached_to=agent_id)  # its folder links and views go: as a detach
    agent = await get_agent(session, agent_id, lock=True)
    await session.delete(agent)
    await session.flush()


async def agent_blocks(session: AsyncSession, agent_id: str) -> list[Block]:
    await get_agent(session, agent_id)
    return (await blocks_in_prompt_order(session, [agent_id]))[agent_id]


async def block_by_label(session: AsyncSession, agent_id: str, label: str) -> Block:
    block = await repository.block_by_label(session, agent_id, label)
    if block is None:  # only now tell an unknown agent from an unknown label: the hit costs one query
        await get_agent(session, agent_id)
        labels = ", ".join(sorted(await repository.labels_of(session, agent_id))) or "none"
        raise NotFound(f"No block with label {label!r} found for agent {agent_id!r} (its labels: {labels}).")
    return block


async def locked_block_by_label(session: AsyncSession, agent_id: str, label: str) -> Block:
    """`block_by_label`, row-locked for an edit: one statement when the label exists."""
    block = await repository.lock_block_by_label(session, agent_id, label)
    if block is None:  # raises the NotFound that names what is unknown, or the label was attached since
        await block_by_label(session, agent_id, label)
        block = await repository.lock_block_by_label(session, agent_id, label)
    if block is None:
        raise Conflict(f"The block {label!r} of agent {agent_id!r} was detached while it was being edited; try again.")
    return block


async def find_block(session: AsyncSession, agent_id: str, label: str, *, lock: bool) -> Block | None:
    """The agent's block with this label, or None. `lock` row-locks it for an edit (re-read under the
    lock, so an edit always applies to the latest value, never a stale snapshot)."""
    if lock:
        return await repository.lock_block_by_label(session, agent_id, label)
    return await repository.block_by_label(session, agent_id, label)


async def block_labels(session: AsyncSession, agent_id: str) -> list[str]:
    return await repository.labels_of(session, agent_id)


async def all_agent_ids(session: AsyncSession) -> list[str]:
    return await repository.all_ids(session)


async def attach_block(session: AsyncSession, agent_id: str, block_id: str) -> AgentWithBlocks:
    """Attach an existing block; idempotent. A label clash is a Conflict that names both blocks."""
    [block] = await block_links.locked_blocks(session, [block_id])
    locked = await _locked_for_blocks(session, agent_id)
    # Read under the agent's lock, which every change of its attachments takes: the label check
    # and the recompile both use this list, as the prompt will show it.
    current = (await blocks_in_prompt_order(session, [agent_id]))[agent_id]
    if any(attached.id == block_id for attached in current):
        return _changed(locked, current)
    if holder := next((attached for attached in current if attached.label == block.label), None):
        raise block_links.label_clash(agent_id, block, holder_id=holder.id)
    attached = [*current, block]  # a new attachment comes last in prompt order
    clash = f"Agent {agent_id!r} already has a block labelled {block.label!r}."
    with conflict_on(block_links.LABEL_CONSTRAINT, clash):
        agent_tools = await recompile_locked(session, locked, attached, repository.LINK, repository.link_parameters(block))
    return _changed(locked, attached, agent_tools)


async def detach_block(session: AsyncSession, agent_id: str, block_id: str) -> AgentWithBlocks:
    """Detach a block from the agent; the block itself survives."""
    locked = await _locked_for_blocks(session, agent_id)  # first, as attach takes it before the link
    current = (await blocks_in_prompt_order(session, [agent_id]))[agent_id]
    block = next((attached for attached in current if attached.id == block_id), None)
    if block is None:
        raise _not_attached(agent_id, block_id)
    kept = [attached for attached in current if attached is not block]
    # The link goes as the prompt is stored; if anything took the link first, neither happens.
    agent_tools = await recompile_locked(session, locked, kept, repository.UNLINK, repository.link_parameters(block))
    if agent_tools is None:
        raise _not_attached(agent_id, block_id)
    return _changed(locked, kept, agent_tools)


def _not_attached(agent_id: str, block_id: str) -> NotFound:
    return NotFound(f"Block {block_id!r} is not attached to agent {agent_id!r}.")


async def _locked_for_blocks(session: AsyncSession, agent_id: str) -> LockedAgent:
    """The agent locked for a change of its blocks and the recompile it causes, in one statement."""
    locked = await lock_for_recompile(session, agent_id)
    if locked is None:
        raise agent_not_found(agent_id)
    return locked


def _changed(locked: LockedAgent, blocks: list[Block], agent_tools: list[Tool] | None = None) -> AgentWithBlocks:
    """The view's input after an attach or detach: `agent_tools` as the change's statement read them
    (None: read them with the view, as when nothing changed)."""
    links = Links(folders=bool(locked.folders), identities=locked.identities, runs=locked.runs)
    return AgentWithBlocks(locked.agent, blocks, links, agent_tools)


async def attach_tool(session: AsyncSession, agent_id: str, tool_id: str) -> Agent:
    """Attach a tool (idempotent), the agent row-locked so concurrent changes of its tools serialize."""
    agent = await get_agent(session, agent_id, lock=True)
    await tools.attach_tools(session, agent_id, [await tools.get_tool(session, tool_id)])
    return agent


async def detach_tool(session: AsyncSession, agent_id: str, tool_id: str) -> Agent:
    agent = await get_agent(session, agent_id, lock=True)
    await tools.detach_tool(session, agent_id, tool_id)
    return agent


async def recompile(session: AsyncSession, agent_id: str, *, update_timestamp: bool, dry_run: bool) -> str:
    if dry_run:
        agent = await get_agent(session, agent_id)
        return await preview_prompt(session, agent, keep_timestamp=not update_timestamp)
    recompiled = await recompile_agents(session, [agent_id], keep_timestamp=not update_timestamp)
    if not recompiled:
        await get_agent(session, agent_id)  # raises the NotFound every agent route gives
    return recompiled[0].prompt


async def prompt_in_mode(session: AsyncSession, agent_id: str, mode: RenderMode) -> str:
    """The agent's current prompt as it would read in `mode` (the stored one is in the agent's own)."""
    return await preview_prompt(session, await get_agent(session, agent_id), keep_timestamp=True, mode=mode)
