"""Compiling and storing agents' system prompts; called in the same transaction as every
prompt-affecting change, so a stored prompt is never stale."""

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any, NamedTuple

from sqlalchemy import UpdateBase, inspect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from memvm.db.tenancy import organization_of_new_rows
from memvm.memory.compiler import BlockView, RenderMode, compile_system_prompt
from memvm.memory.files_view import DirectoryView, FileLimits, FileView, file_limits, render_directories
from memvm.memory.metadata import MemoryStats, render_memory_metadata
from memvm.orm import Agent, Block, Tool
from memvm.prompts import repository
from memvm.prompts.schemas import PromptBlock, PromptInputs, StoredPrompt

_DEFERRED_RECOMPILES = "memvm.recompiles_at_end"  # session.info key: agent ids to recompile at the end
_DEFERRED_READERS = "memvm.readers_recompiled_at_end"  # session.info key: archives whose readers to recompile

DEFAULT_SYSTEM_PROMPT = files("memvm.prompts").joinpath("default_system.txt").read_text(encoding="utf-8").rstrip()


def block_views(blocks: Sequence[Block | PromptBlock]) -> list[BlockView]:
    return [
        BlockView(label=b.label, value=b.value, limit=b.char_limit, description=b.description, read_only=b.read_only)
        for b in blocks
    ]


def file_limits_of(agent: Agent | PromptInputs) -> FileLimits:
    """How many of its files the agent may have open and how many characters each view shows: its
    own settings, else Letta's defaults for its model's context window."""
    context_window = agent.context_window_limit or (agent.llm_config or {}).get("context_window")
    return file_limits(agent.max_files_open, agent.per_file_view_window_char_limit, context_window)


def directory_views(rows: Sequence[Any]) -> list[DirectoryView]:
    """The rows of `repository.directories_in_prompt_order` for one agent, as the compiler takes them."""
    directories: dict[str, DirectoryView] = {}
    for row in rows:
        directory = directories.setdefault(row.folder_name, DirectoryView(row.folder_name, row.description, row.instructions))
        if row.file_name is not None:
            file = FileView(row.file_name, row.is_open, row.visible_content, row.start_line, row.end_line, row.line_count)
            directories[row.folder_name] = replace(directory, files=(*directory.files, file))
    return list(directories.values())


def compile_agent_prompt(
    agent: Agent | PromptInputs,
    blocks: Sequence[Block | PromptBlock],
    stats: MemoryStats,
    *,
    compiled_at: datetime,
    directories: Sequence[DirectoryView] = (),
    mode: RenderMode | None = None,
    conversation_id: str = "default",
) -> str:
    """The agent's prompt, in its own render mode unless `mode` asks for another."""
    attached = [file for directory in directories for file in directory.files]
    stats = replace(stats, files_open=sum(file.is_open for file in attached), files_total=len(attached))
    metadata = render_memory_metadata(
        agent_id=agent.id, stats=stats, compiled_at=compiled_at, timezone=agent.timezone, conversation_id=conversation_id
    )
    return compile_system_prompt(
        system=agent.system,
        blocks=block_views(blocks),
        mode=mode or RenderMode(agent.memory_render_mode),
        metadata=metadata,
        directories=render_directories(directories, file_limits_of(agent)),
    )


def compile_new_agent(agent: Agent, blocks: Sequence[Block]) -> None:
    """Compile the prompt of an agent being created, before its row is stored: it has nothing outside
    its context window yet, so this costs no statement (a recompile would lock and re-read it)."""
    agent.system_compiled_at = datetime.now(UTC)
    agent.compiled_system = compile_agent_prompt(agent, blocks, MemoryStats(), compiled_at=agent.system_compiled_at)


async def blocks_in_prompt_order(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Block]]:
    """Each agent's blocks in the order its prompt shows them (attachment order)."""
    return await repository.blocks_in_prompt_order(session, agent_ids)


@asynccontextmanager
async def recompiles_at_end(session: AsyncSession) -> AsyncIterator[None]:
    """Inside, recompiles are collected and run once on leaving: the agents are locked after every
    memory block the writes inside locked, in the order a block PATCH locks them (blocks, then
    agents). A turn's step that edits its own block and then a shared one would otherwise hold
    its agent while waiting for the shared block that a PATCH holds while waiting for the agent.
    After a change of an archive's passages (`recompile_readers`), its readers are found and locked
    with them, in a statement before the recompile reads their counts."""
    pending: set[str] = set()
    archives: set[str] = set()
    session.info[_DEFERRED_RECOMPILES], session.info[_DEFERRED_READERS] = pending, archives
    try:
        yield
    finally:
        del session.info[_DEFERRED_RECOMPILES], session.info[_DEFERRED_READERS]
    if archives:
        pending.update(await repository.lock_readers(session, sorted(pending), sorted(archives)))
    await recompile_agents(session, pending)


async def recompile_readers(session: AsyncSession, archive_id: str) -> None:
    """Recompile the agents that read an archive whose passages (and counts, locked first) this
    transaction changed: they are locked after the archive, in a statement before the one that reads
    their counts, as a statement that waits for a lock reads what was committed before it began, not
    what the holder committed meanwhile (another archive's passages, say), and would store that.
    Inside `recompiles_at_end`, at its end, after the blocks the step locked."""
    archives = session.info.get(_DEFERRED_READERS)
    if archives is not None:
        archives.add(archive_id)
        return
    await recompile_agents(session, await lock_readers(session, archive_id))


async def lock_readers(session: AsyncSession, archive_id: str) -> list[str]:
    """The agents that read the archive, locked as a recompile locks them; their ids."""
    return await repository.lock_readers(session, [], [archive_id])


@contextmanager
def recompiles_dropped_on_error(session: AsyncSession) -> Iterator[None]:
    """Around a savepoint inside `recompiles_at_end`: when an error rolls the writes back, the
    recompiles they asked for are dropped with them (a failed tool call changes no prompt)."""
    deferred = [session.info[key] for key in (_DEFERRED_RECOMPILES, _DEFERRED_READERS) if key in session.info]
    before = [set(ids) for ids in deferred]
    try:
        yield
    except BaseException:
        for ids, kept in zip(deferred, before, strict=True):
            ids.intersection_update(kept)
        raise


async def recompile_agents(
    session: AsyncSession, agent_ids: Iterable[str], *, keep_timestamp: bool = False
) -> list[StoredPrompt]:
    """Lock the agents, then compile from the blocks as they are now and store the result. Returns
    the prompts stored (none while recompiles are deferred: see `recompiles_at_end`); the session's
    copies of the agents, if it holds any, show them."""
    ids = sorted(set(agent_ids))
    if not ids:
        return []
    deferred = session.info.get(_DEFERRED_RECOMPILES)
    if deferred is not None and not keep_timestamp:
        deferred.update(ids)
        return []
    locked = await repository.lock_prompt_inputs(session, ids)
    blocks = await repository.prompt_blocks(session, ids)
    stored = await _store_prompts(session, locked, blocks, keep_timestamp=keep_timestamp)
    _update_held(session, stored)
    return stored


class LockedAgent(NamedTuple):
    """An agent locked for a recompile (`lock_for_recompile`), with what its prompt and view need."""

    agent: Agent
    recall: int
    passages: int
    folders: int  # attached folders
    tags: tuple[str, ...]  # of its passages, as its prompt lists them
    identities: bool  # whether it has any
    runs: bool


async def lock_for_recompile(session: AsyncSession, agent_id: str) -> LockedAgent | None:
    """Lock the agent as `recompile_agents` does, with its counts, in one statement: for a change
    that locks the agent first, then recompiles it with `recompile_locked` as it writes."""
    row = await repository.lock_agent_with_links(session, agent_id)
    return None if row is None else LockedAgent(*row)


async def recompile_locked(
    session: AsyncSession, locked: LockedAgent, blocks: list[Block], change: UpdateBase, parameters: dict[str, Any]
) -> list[Tool] | None:
    """Run `change` (an INSERT or DELETE of rows of the agent locked by `lock_for_recompile` that
    returns their agent_id, with `parameters` and the agent's id and organization as `agent` and
    `organization`) and store the prompt of `blocks`, the agent's blocks in prompt order once it
    has run, in one statement: neither the agent nor its blocks are read again. Returns the agent's
    tools, which the same statement reads for its view, or None, and nothing stored, if the change
    touched no row. While recompiles are deferred the prompt is stored as it was, and recompiled at
    the end."""
    agent = locked.agent
    deferred = session.info.get(_DEFERRED_RECOMPILES)
    if deferred is not None:
        deferred.add(agent.id)
        prompt, compiled_at = agent.compiled_system, agent.system_compiled_at
    else:
        directories = await agent_directories(session, agent.id) if locked.folders else []
        compiled_at = datetime.now(UTC)
        stats = MemoryStats(locked.recall, locked.passages, locked.tags)
        prompt = compile_agent_prompt(agent, blocks, stats, compiled_at=compiled_at, directories=directories)
    stored = await repository.store_prompt_with(session, change, parameters, agent.id, prompt, compiled_at)
    if stored is None:
        return None
    updated_at, tools = stored
    show_stored(agent, StoredPrompt(agent.id, prompt, compiled_at, updated_at))
    return tools


async def _store_prompts(
    session: AsyncSession, locked: Sequence[PromptInputs], blocks: Mapping[str, Sequence[PromptBlock]], *, keep_timestamp: bool
) -> list[StoredPrompt]:
    # Only agents with folders have directories to read: the others' recompiles cost no statement more.
    with_folders = [agent.id for agent in locked if agent.folders]
    directories = await repository.directories_in_prompt_order(session, with_folders) if with_folders else {}
    now = datetime.now(UTC)
    stored = []
    for agent in locked:
        compiled_at = agent.system_compiled_at if keep_timestamp else now
        shown = directory_views(directories.get(agent.id, []))
        stats = MemoryStats(agent.recall, agent.passages, agent.tags)
        prompt = compile_agent_prompt(agent, blocks[agent.id], stats, compiled_at=compiled_at, directories=shown)
        updated_at = await repository.store_prompt(session, agent.id, prompt, compiled_at)
        stored.append(StoredPrompt(agent.id, prompt, compiled_at, updated_at))
    return stored


def _update_held(session: AsyncSession, stored: Sequence[StoredPrompt]) -> None:
    """What the recompile stored, on the session's copies of the agents (those it holds)."""
    organization_id = organization_of_new_rows(session.sync_session, "Agent")
    mapper = inspect(Agent)
    for prompt in stored:
        held = session.sync_session.identity_map.get(mapper.identity_key_from_primary_key((organization_id, prompt.agent_id)))
        if held is not None:
            show_stored(held, prompt)


def show_stored(agent: Agent, stored: StoredPrompt) -> None:
    """The stored prompt on the agent's object, as if loaded: the session has nothing of it left to write."""
    stored_values = {"compiled_system": stored.prompt, "system_compiled_at": stored.compiled_at, "updated_at": stored.updated_at}
    for name, value in stored_values.items():
        set_committed_value(agent, name, value)


async def preview_prompt(session: AsyncSession, agent: Agent, *, keep_timestamp: bool, mode: RenderMode | None = None) -> str:
    """What a recompile would store now, without storing it (or the same in another render mode)."""
    blocks = await repository.blocks_in_prompt_order(session, [agent.id])
    stats = await memory_stats(session, [agent.id])
    compiled_at = agent.system_compiled_at if keep_timestamp else datetime.now(UTC)
    directories = await agent_directories(session, agent.id)
    return compile_agent_prompt(
        agent, blocks[agent.id], stats[agent.id], compiled_at=compiled_at, directories=directories, mode=mode
    )


async def agent_directories(session: AsyncSession, agent_id: str) -> list[DirectoryView]:
    """The agent's folders and files as its prompt shows them."""
    return directory_views((await repository.directories_in_prompt_order(session, [agent_id]))[agent_id])


async def conversation_prompt(
    session: AsyncSession, agent: Agent, conversation_id: str, isolated: Sequence[Block], *, compiled_at: datetime
) -> str:
    """The prompt of one of the agent's conversations: the agent's blocks as they are now, its own
    copy where the conversation isolated a label, and the conversation's own recall count."""
    blocks = (await repository.blocks_in_prompt_order(session, [agent.id]))[agent.id]
    own = {block.label: block for block in isolated}
    stats = (await memory_stats(session, [agent.id]))[agent.id]
    stats = replace(stats, recall_messages=await repository.conversation_outside_count(session, conversation_id))
    shown = [own.get(block.label, block) for block in blocks]
    directories = await agent_directories(session, agent.id)
    return compile_agent_prompt(
        agent, shown, stats, compiled_at=compiled_at, directories=directories, conversation_id=conversation_id
    )


async def memory_stats(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, MemoryStats]:
    """Counts of what each agent has outside its prompt (never the content), and its passages' tags."""
    counts = await repository.outside_counts(session, agent_ids)
    return {agent_id: MemoryStats(*counts.get(agent_id, (0, 0, ()))) for agent_id in agent_ids}
