"""Importing an agent file: plan from the skeleton, embed archival passages and cut the folders'
files into chunks, then write everything in one transaction while the messages stream by. Any
problem, found before or during the writing, rolls the whole file back and is reported with all the
others."""

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.actors import Caller
from memvm.agentfiles import legacy
from memvm.agentfiles.fileschema import AgentFile
from memvm.agentfiles.folders import FolderWriter, read_documents
from memvm.agentfiles.history import HistoryWalk, Row, parse_message
from memvm.agentfiles.plan import ImportPlan, check_rule_tools, plan_import, rule_tool_names
from memvm.agentfiles.reader import Source, iter_messages, read_skeleton
from memvm.agentfiles.schemas import ImportOptions, ImportResult, InvalidAgentFile
from memvm.agents import service as agents
from memvm.archives import service as archives
from memvm.blocks import service as blocks
from memvm.db.uow import transaction
from memvm.embeddings.ports import EmbeddingModel
from memvm.embeddings.registry import EmbedderRegistry
from memvm.errors import DomainError
from memvm.messages import service as messages
from memvm.orm import Agent, Tool
from memvm.prompts.service import recompile_agents
from memvm.tools import service as tools

BATCH = 1000  # messages per INSERT


@dataclass(frozen=True)
class ImportContext:
    sessionmaker: async_sessionmaker[AsyncSession]
    embedders: EmbedderRegistry
    caller: Caller


async def import_agent_file(context: ImportContext, stream: Source, options: ImportOptions) -> ImportResult:
    skeleton = await asyncio.to_thread(read_skeleton, stream)
    is_legacy = legacy.is_legacy(skeleton)
    plan = plan_import(_parse(legacy.to_current(skeleton) if is_legacy else skeleton), options)
    vectors = await _passage_vectors(context, plan) if not plan.problems else {}
    if not plan.problems:
        await asyncio.to_thread(read_documents, plan.folders)
    async with transaction(context.sessionmaker, context.caller.organization_id) as session:
        check_rule_tools(plan, set(await tools.tools_named(session, rule_tool_names(plan))))
        writer = _Writer(session, context, plan, options) if not plan.problems else None
        created = await writer.create_entities(vectors) if writer else []
        await _walk_histories(plan, stream, options, writer, is_legacy=is_legacy)
        if plan.problems:
            raise InvalidAgentFile(plan.problems)  # rolls back everything written above
        await recompile_agents(session, [agent.id for agent in created])
    return ImportResult(agent_ids=[agent.id for agent in created], skipped=plan.skipped, repairs=plan.repairs, notes=plan.notes)


def _parse(skeleton: dict[str, Any]) -> AgentFile:
    try:
        return AgentFile.model_validate(skeleton)
    except ValidationError as error:
        problems = [f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in error.errors()]
        raise InvalidAgentFile(problems) from None


async def _passage_vectors(context: ImportContext, plan: ImportPlan) -> dict[str, tuple[EmbeddingModel, list[list[float]]]]:
    """Each archive's passages embedded (before the transaction) with the model of the first agent
    that reads it: Letta files carry no vectors, and memvm's are recomputed the same way."""
    vectors = {}
    for file_id, archive in plan.archives.items():
        reader = next((agent for agent in plan.agents if file_id in agent.source.archive_ids), None)
        embedder = context.embedders.for_handle(reader.create.embedding if reader else None)
        embedded = await embedder.embed([passage.text for passage in archive.passages]) if archive.passages else []
        vectors[file_id] = (EmbeddingModel.of(embedder), embedded)
    return vectors


async def _walk_histories(
    plan: ImportPlan, stream: Source, options: ImportOptions, writer: "_Writer | None", *, is_legacy: bool
) -> None:
    """Check every agent's messages in file order; store them when a writer is given."""
    if options.strip_messages or not any(agent.messages for agent in plan.file.agents):
        return
    # Every agent's history is checked, also that of an agent the plan refused: all problems at once.
    walks = {
        index: HistoryWalk(agent=agent, repair=options.skip_unpaired_messages) for index, agent in enumerate(plan.file.agents)
    }
    batches = _batches(stream, walks, is_legacy=is_legacy)
    while (batch := await asyncio.to_thread(next, batches, None)) is not None:
        if writer is not None:
            await writer.store_messages(*batch)
    for walk in walks.values():
        plan.problems += walk.problems
        plan.repairs += walk.repairs


def _batches(stream: Source, walks: dict[int, HistoryWalk], *, is_legacy: bool) -> Iterator[tuple[int, list[Row]]]:
    """(index of the agent in the file, rows ready to store), at most BATCH rows at a time."""
    pending: list[Row] = []
    current = 0
    for position, (index, raw) in enumerate(iter_messages(stream, legacy=is_legacy)):
        if is_legacy and isinstance(raw, dict):
            raw.setdefault("id", legacy.message_id(position))
        if index != current and pending:
            yield current, pending
            pending = []
        current = index
        message = parse_message(raw, f"agent {walks[index].agent.id} message #{position}")
        if isinstance(message, str):
            walks[index].problems.append(message)
            continue
        pending += walks[index].accept(message)
        if len(pending) >= BATCH:
            yield current, pending
            pending = []
    if pending:
        yield current, pending
    for index, walk in walks.items():
        if rest := walk.finish():
            yield index, rest


class _Writer:
    """Creates the planned tools, blocks, archives, folders and agents, then stores messages as they come."""

    def __init__(self, session: AsyncSession, context: ImportContext, plan: ImportPlan, options: ImportOptions) -> None:
        self.session, self.plan, self.options = session, plan, options
        self.caller, self.embedders = context.caller, context.embedders
        self.folders = FolderWriter(session, context.embedders, plan.folders, plan.file)
        self.agent_of: dict[int, str] = {}  # index of the agent in the file → the created agent's id
        self.otids: dict[int, set[str]] = {}

    async def create_entities(self, vectors: dict[str, tuple[EmbeddingModel, list[list[float]]]]) -> list[Agent]:
        tool_ids = await self._tools()
        block_ids = await self._blocks()
        archive_ids = await self._archives(vectors)
        await self.folders.create()
        created = []
        file_index = {id(agent): index for index, agent in enumerate(self.plan.file.agents)}
        for agent_plan in self.plan.agents:
            create = agent_plan.create.model_copy(
                update={
                    "tool_ids": [tool_ids[i] for i in agent_plan.source.tool_ids if i in tool_ids],
                    "block_ids": [block_ids[i] for i in agent_plan.source.block_ids if i in block_ids],
                }
            )
            try:
                agent = (await agents.create_agent(self.session, create, actor=self.caller.actor)).agent
                await self._attach_archives(agent, [archive_ids[i] for i in agent_plan.source.archive_ids if i in archive_ids])
                await self.folders.give(agent.id, agent_plan.source)
            except DomainError as error:
                self.plan.problems.append(f"agent {agent_plan.source.id}: {error.message}")
                continue
            created.append(agent)
            self.agent_of[file_index[id(agent_plan.source)]] = agent.id
        return created

    async def _attach_archives(self, agent: Agent, archive_ids: list[str]) -> None:
        """The first archive listed becomes the one the agent's inserts go to (memvm lists it first)."""
        for archive_id in archive_ids:
            model = EmbeddingModel.of(self.embedders.for_handle(agent.embedding))
            await archives.attach_archive(self.session, agent, archive_id, model)
        if archive_ids:
            # create_agent leaves its agent out of the session: the change goes to the session's own copy.
            stored = await agents.get_agent(self.session, agent.id)
            stored.default_archive_id = agent.default_archive_id = archive_ids[0]

    async def _tools(self) -> dict[str, str]:
        """File tool id → memvm tool id: built-ins by name; custom tools reused by name unless
        override_existing_tools replaces their source; an MCP server's tool by name, when the
        organization has that server's tool."""
        existing = await tools.tools_named(self.session, [tool.name for tool in self.plan.tools.values()])
        ids = {}
        for file_id, tool_plan in self.plan.tools.items():
            tool: Tool | None = existing.get(tool_plan.name)
            if tool_plan.mcp_server is not None and (tool is None or tool.mcp_server_id is None):
                self.plan.notes.append(
                    f"tool {tool_plan.name!r} of MCP server {tool_plan.mcp_server!r} was left out: add the server "
                    "(POST /v1/mcp-servers/), then attach its tool."
                )
                continue
            if tool_plan.custom is not None and (tool is None or self.options.override_existing_tools):
                tool = await tools.upsert_tool(self.session, tool_plan.custom)
            elif tool_plan.custom is not None:
                self.plan.notes.append(f"tool {tool_plan.name!r}: your organization's existing tool was reused.")
            if tool is not None:
                ids[file_id] = tool.id
        return ids

    async def _blocks(self) -> dict[str, str]:
        file_ids = list(self.plan.blocks)
        specs = [self.plan.blocks[file_id] for file_id in file_ids]
        created = await blocks.create_blocks(
            self.session, [spec.create for spec in specs], actor=self.caller.actor, versions=[spec.version for spec in specs]
        )
        return {file_id: block.id for file_id, block in zip(file_ids, created, strict=True)}

    async def _archives(self, vectors: dict[str, tuple[EmbeddingModel, list[list[float]]]]) -> dict[str, str]:
        ids = {}
        for file_id, archive in self.plan.archives.items():
            model, embedded = vectors[file_id]
            created = await archives.create_archive(self.session, archive.create, model)
            items = list(zip(archive.passages, embedded, strict=True))
            await archives.insert_passages(self.session, created, items, model=model, writer=self.caller.actor)
            ids[file_id] = created.id
        return ids

    async def store_messages(self, agent_index: int, rows: list[Row]) -> None:
        if agent_index not in self.agent_of:
            return
        seen = self.otids.setdefault(agent_index, set())
        for row in rows:
            row.pop("file_id", None)
            row.setdefault("created_at", datetime.now(UTC))
            if row["otid"] in seen:
                row["otid"] = None  # memvm de-duplicates client retries by otid: keep the first
            elif row["otid"] is not None:
                seen.add(row["otid"])
        await messages.store_imported(self.session, self.agent_of[agent_index], rows)
