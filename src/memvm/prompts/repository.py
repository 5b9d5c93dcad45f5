"""The SQL that gathers a prompt's inputs: the agents (locked), their blocks in prompt order, and
the counts of what each agent keeps outside its prompt; and the SQL that stores a prompt."""

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    ARRAY,
    BindParameter,
    ColumnElement,
    Select,
    String,
    Update,
    UpdateBase,
    and_,
    any_,
    bindparam,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db import direct
from memvm.db.base import Base
from memvm.db.direct import ORGANIZATION, Direct
from memvm.db.tenancy import organization_of_new_rows
from memvm.orm import (
    Agent,
    AgentArchive,
    AgentBlock,
    AgentFile,
    AgentFolder,
    AgentTool,
    Archive,
    ArchiveTag,
    Block,
    Folder,
    FolderFile,
    Message,
    Tool,
)
from memvm.orm.agent_links import HAS_IDENTITIES, HAS_RUNS
from memvm.prompts.schemas import PROMPT_AGENT_COLUMNS, PromptBlock, PromptInputs

# <memory_metadata> lists at most this many distinct archival tags.
MAX_LISTED_TAGS = 100
# Read on every agent view and every recompile: built once, with bound parameters.
_OF_AGENTS: BindParameter[list[str]] = bindparam("agent_ids", expanding=True)
_BLOCKS_OF_AGENTS = (
    select(AgentBlock.agent_id, Block)
    .join(Block, Block.id == AgentBlock.block_id)
    .where(AgentBlock.agent_id.in_(_OF_AGENTS))
    .order_by(AgentBlock.agent_id, AgentBlock.position)
    .execution_options(populate_existing=True)
)

# Each attached folder in attachment order, with its files as the agent sees them (none: one row of
# NULL file columns). Closed files carry no window, so this never reads a file's content.
_DIRECTORIES_OF_AGENTS = (
    select(
        AgentFolder.agent_id,
        Folder.name.label("folder_name"),
        Folder.description,
        Folder.instructions,
        FolderFile.file_name,
        FolderFile.line_count,
        AgentFile.is_open,
        AgentFile.visible_content,
        AgentFile.start_line,
        AgentFile.end_line,
    )
    .join(Folder, Folder.id == AgentFolder.folder_id)
    .outerjoin(AgentFile, and_(AgentFile.agent_id == AgentFolder.agent_id, AgentFile.folder_id == AgentFolder.folder_id))
    .outerjoin(FolderFile, FolderFile.id == AgentFile.file_id)
    .where(AgentFolder.agent_id.in_(_OF_AGENTS))
    .order_by(AgentFolder.agent_id, AgentFolder.position, FolderFile.file_name)
)


def _outside_counts() -> tuple[Any, Any, Any, Any]:
    """Per agent row: messages of its default conversation stored but out of the context window,
    passages in its archives, folders attached (none: no need to read its directories) and the
    first MAX_LISTED_TAGS distinct tags of those passages (the prompt lists them: read here, they
    cost no statement of their own). Passages and tags come from their archives' counts (kept by
    archives/repository.py), so they cost the same however many passages an archive holds."""
    recall = (
        select(func.count())
        .select_from(Message)
        .where(_of_agent(Message), Message.conversation_id.is_(None), ~Message.in_context)
        .scalar_subquery()
    )
    archives = select(AgentArchive.archive_id).where(_of_agent(AgentArchive)).correlate(Agent)
    stored = func.coalesce(func.sum(Archive.passage_count), 0)
    passages = select(stored).where(Archive.organization_id == Agent.organization_id, Archive.id.in_(archives)).scalar_subquery()
    folders = select(func.count()).select_from(AgentFolder).where(_of_agent(AgentFolder)).scalar_subquery()
    return recall, passages, folders, _first_tags()


def _of_agent(linked: Any) -> ColumnElement[bool]:
    """Rows of `linked` (a table with agent_id) of the agent of the enclosing statement, organization
    named: a direct statement (db/direct.py) has no session to scope its subqueries."""
    return and_(linked.organization_id == Agent.organization_id, linked.agent_id == Agent.id)


def _first_tags() -> Any:
    """The agent's first MAX_LISTED_TAGS distinct tags: each archive's first ones, read in order
    from its tag index, hold every tag that can be among them, so no archive is read further."""
    first_of_archive = (
        select(ArchiveTag.tag)
        .where(ArchiveTag.organization_id == AgentArchive.organization_id, ArchiveTag.archive_id == AgentArchive.archive_id)
        .order_by(ArchiveTag.tag)
        .limit(MAX_LISTED_TAGS)
        .lateral("first_of_archive")
    )
    tag = first_of_archive.c.tag
    listed = (
        select(tag)
        .distinct()
        .select_from(AgentArchive)
        .join(first_of_archive, true())
        .where(_of_agent(AgentArchive))
        .order_by(tag)
        .limit(MAX_LISTED_TAGS)
    )
    return func.array(listed.scalar_subquery(), type_=ARRAY(String))


# In id order, so concurrent recompiles of overlapping agent sets cannot deadlock. FOR NO KEY
# UPDATE (a recompile changes no key): it does not wait for the key-share locks that inserting a
# message takes on its agent, so a turn that stored its step's messages and then edits a shared
# block cannot deadlock with a block write recompiling that agent (blocks first, then agents).
_AGENT_TABLE, _LINK_TABLE, _BLOCK_TABLE = (Base.metadata.tables[m.__tablename__] for m in (Agent, AgentBlock, Block))
_AGENTS, _LINKS, _BLOCKS = _AGENT_TABLE.c, _LINK_TABLE.c, _BLOCK_TABLE.c
_ANY_AGENT = any_(bindparam("agent_ids", type_=ARRAY(String)))
_LOCK_PROMPT_INPUTS = Direct(  # every recompile: direct statements (db/direct.py)
    select(*(_AGENTS[name] for name in PROMPT_AGENT_COLUMNS), *_outside_counts())
    .where(_AGENTS.organization_id == bindparam(ORGANIZATION), _AGENTS.id == _ANY_AGENT)
    .order_by(_AGENTS.id)
    .with_for_update(key_share=True, of=_AGENT_TABLE)
)
# The same locks alone, on these agents and those that read these archives: taken in a statement
# before the one that reads their counts, so that it reads them fresh (see service.recompile_readers).
_ARCHIVE_LINKS = Base.metadata.tables[AgentArchive.__tablename__].c
_READERS = select(_ARCHIVE_LINKS.agent_id).where(
    _ARCHIVE_LINKS.organization_id == bindparam(ORGANIZATION),
    _ARCHIVE_LINKS.archive_id == any_(bindparam("archive_ids", type_=ARRAY(String))),
)
_LOCK_READERS = Direct(
    select(_AGENTS.id)
    .where(_AGENTS.organization_id == bindparam(ORGANIZATION), or_(_AGENTS.id == _ANY_AGENT, _AGENTS.id.in_(_READERS)))
    .order_by(_AGENTS.id)
    .with_for_update(key_share=True, of=_AGENT_TABLE)
)
_PROMPT_BLOCKS = Direct(
    select(_LINKS.agent_id, *(_BLOCKS[name] for name in PromptBlock._fields))
    .join(_BLOCK_TABLE, and_(_BLOCKS.organization_id == _LINKS.organization_id, _BLOCKS.id == _LINKS.block_id))
    .where(_LINKS.organization_id == bindparam(ORGANIZATION), _LINKS.agent_id == _ANY_AGENT)
    .order_by(_LINKS.agent_id, _LINKS.position)
)
_OUTSIDE_COUNTS = select(Agent.id, *_outside_counts()).where(Agent.id.in_(_OF_AGENTS))
# One agent locked as above, and also whether it has identities and runs: what an attach or detach
# of a block needs for its recompile and its answer (whose view reads only the relations it has).
_LOCK_AGENT_WITH_LINKS = (
    select(Agent, *_outside_counts(), HAS_IDENTITIES, HAS_RUNS)
    .where(Agent.id == bindparam("agent_id"))
    .with_for_update(key_share=True, of=Agent)
    .execution_options(populate_existing=True)
)


async def lock_prompt_inputs(session: AsyncSession, agent_ids: Sequence[str]) -> list[PromptInputs]:
    """What the agents' prompts are compiled from, the agents locked (in id order: see above)."""
    rows = await direct.run(session, _LOCK_PROMPT_INPUTS, {"agent_ids": list(agent_ids)})
    return [PromptInputs._make((*row[:-1], tuple(row[-1]))) for row in rows]


async def prompt_blocks(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[PromptBlock]]:
    """What the agents' prompts show of their blocks, each agent's in attachment order."""
    by_agent: dict[str, list[PromptBlock]] = {agent_id: [] for agent_id in agent_ids}
    for row in await direct.run(session, _PROMPT_BLOCKS, {"agent_ids": list(agent_ids)}):
        by_agent[row.agent_id].append(PromptBlock._make(row[1:]))
    return by_agent


async def lock_readers(session: AsyncSession, agent_ids: Sequence[str], archive_ids: Sequence[str]) -> list[str]:
    """The agents, and those that read the archives, locked as `lock_agents` locks them; their ids."""
    parameters = {"agent_ids": list(agent_ids), "archive_ids": list(archive_ids)}
    return list((await direct.run(session, _LOCK_READERS, parameters)).scalars())


async def lock_agent_with_links(
    session: AsyncSession, agent_id: str
) -> tuple[Agent, int, int, int, tuple[str, ...], bool, bool] | None:
    """The agent locked as `lock_agents` locks it, with its outside counts and tags and whether it
    has identities and runs, in one statement; None if there is no such agent."""
    row = (await session.execute(_LOCK_AGENT_WITH_LINKS, {"agent_id": agent_id})).first()
    return None if row is None else (row[0], row[1], row[2], row[3], tuple(row[4]), row[5], row[6])


async def blocks_in_prompt_order(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Block]]:
    """Blocks of each agent in attachment order, read fresh (not from the identity map)."""
    by_agent: dict[str, list[Block]] = {agent_id: [] for agent_id in agent_ids}
    for agent_id, block in await session.execute(_BLOCKS_OF_AGENTS, {"agent_ids": list(agent_ids)}):
        by_agent[agent_id].append(block)
    return by_agent


async def directories_in_prompt_order(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Any]]:
    """Per agent, one row per attached file (or per attached folder without files), folders in
    attachment order and files by name: see _DIRECTORIES_OF_AGENTS for the columns."""
    by_agent: dict[str, list[Any]] = {agent_id: [] for agent_id in agent_ids}
    for row in await session.execute(_DIRECTORIES_OF_AGENTS, {"agent_ids": list(agent_ids)}):
        by_agent[row.agent_id].append(row)
    return by_agent


async def outside_counts(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, tuple[int, int, tuple[str, ...]]]:
    """Per agent, in one statement: messages stored but out of the context window, passages in the
    agent's archives and their first tags."""
    rows = await session.execute(_OUTSIDE_COUNTS, {"agent_ids": list(agent_ids)})
    return {agent_id: (messages, stored, tuple(tags)) for agent_id, messages, stored, _folders, tags in rows}


async def conversation_outside_count(session: AsyncSession, conversation_id: str) -> int:
    """Messages of the conversation stored but out of its context window."""
    query = select(func.count()).where(Message.conversation_id == conversation_id, ~Message.in_context)
    return await session.scalar(query) or 0


def _prompt_update(organization: str) -> Update:
    """Store the agent's (parameter `agent`) prompt; the organization named by the parameter `organization`."""
    agents = _AGENT_TABLE.c
    return (
        update(_AGENT_TABLE)
        .where(agents.organization_id == bindparam(organization), agents.id == bindparam("agent"))
        .values(compiled_system=bindparam("prompt"), system_compiled_at=bindparam("compiled_at"))
        .returning(agents.updated_at)
    )


_STORE_PROMPT = Direct(_prompt_update(ORGANIZATION))  # every recompile: a direct statement (db/direct.py)


async def store_prompt(session: AsyncSession, agent_id: str, prompt: str, compiled_at: datetime) -> datetime:
    """Store the agent's prompt; its new updated_at."""
    params = {"agent": agent_id, "prompt": prompt, "compiled_at": compiled_at}
    updated_at: datetime = (await direct.run(session, _STORE_PROMPT, params)).scalar_one()
    return updated_at


@cache  # one UPDATE per change statement (each a module constant), built on first use
def _storing_prompt(change: UpdateBase) -> Update:
    # Core, as the changes are: the ORM made a new copy of an UPDATE, and its cache key, on every
    # run. So the statement names its organization itself (the session scopes only ORM statements).
    changed = change.cte("changed")
    return _prompt_update("organization").add_cte(changed).where(select(changed.c.agent_id).exists())


@cache  # as _storing_prompt
def _storing_prompt_reading_tools(change: UpdateBase) -> Select[datetime, Tool | None]:
    # ORM, unlike the write: the session scopes the tools and their links to the organization
    # (db/tenancy.py). The read sees the statement's snapshot, which the write changes no tool of.
    stored = _storing_prompt(change).cte("stored")
    return (
        select(stored.c.updated_at, Tool)
        .select_from(stored)
        .outerjoin(AgentTool, AgentTool.agent_id == bindparam("agent"))
        .outerjoin(Tool, Tool.id == AgentTool.tool_id)
        .order_by(AgentTool.position)
    )


async def store_prompt_with(
    session: AsyncSession, change: UpdateBase, parameters: dict[str, Any], agent_id: str, prompt: str, compiled_at: datetime
) -> tuple[datetime, list[Tool]] | None:
    """Run `change` (an INSERT or DELETE of the agent's rows that returns their agent_id; it gets
    the parameters `agent` and `organization` besides its own) and store the agent's prompt, in one
    statement that also reads the agent's tools in attachment order (what its view shows, one
    statement fewer): the agent's new updated_at and its tools, or None, and no prompt stored, if
    the change touched no row."""
    organization_id = organization_of_new_rows(session.sync_session, "Agent")  # never ALL_ORGANIZATIONS
    values = {**parameters, "organization": organization_id, "agent": agent_id, "prompt": prompt, "compiled_at": compiled_at}
    rows = (await session.execute(_storing_prompt_reading_tools(change), values)).all()
    if not rows:
        return None
    return rows[0][0], [tool for _, tool in rows if tool is not None]
