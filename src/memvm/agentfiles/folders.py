"""Folders in agent files: what the file's `sources`, `files` and agents' `files_agents` become
(planned from the skeleton, pure), their text cut into chunks before the transaction, and the
folders, files, links and views created inside it.

A file's text travels with it, so it is not read again: its chunks are cut here, as the worker cuts
them, and it is stored with status `embedding`; the embedding worker gives them vectors with the
folder's model and marks it `completed`. (Stored as `parsing`, the worker would show it again from
line 1 to every agent of its folder, undoing the views the file describes.) A file the agent file
holds no text for, or whose text cannot be stored, is imported as `error` saying why, and no agent
sees it. A folder whose name is taken in the organization gets a suffix, as in Letta.
"""

import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agentfiles.fileschema import AgentFile, FileAgent, FileAttachment, FileDocument, FileSource
from memvm.agentfiles.schemas import ImportOptions
from memvm.db.pagination import PageRequest
from memvm.embeddings.ports import EmbeddingModel
from memvm.embeddings.registry import DEFAULT_EMBEDDING_HANDLE, EmbedderRegistry
from memvm.errors import DomainError
from memvm.files import processing, uploads, views
from memvm.files import service as folders
from memvm.files.parsing import ParseError, parse_document
from memvm.files.schemas import FolderCreate
from memvm.orm import Folder, FolderFile

_NAME_CHARS = 200  # FolderCreate.name's limit
_LONG_AGO = datetime.min.replace(tzinfo=UTC)


@dataclass
class DocumentPlan:
    source_id: str  # the file-local id of its folder
    read: uploads.ReadFile  # its outcome is filled in by read_documents
    content: str | None


@dataclass
class FoldersPlan:
    """`problems` and `notes` are the import's own lists (ImportPlan's), shared."""

    folders: dict[str, FolderCreate] = field(default_factory=dict)  # by file-local source id
    documents: dict[str, DocumentPlan] = field(default_factory=dict)  # by file-local file id
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan_folders(file: AgentFile, options: ImportOptions, plan: FoldersPlan) -> FoldersPlan:
    for source in file.sources:
        _plan_folder(plan, source, _folder_handle(plan, file, source, options))
    sources = {source.id: source for source in file.sources}
    for document in file.files:
        if document.source_id not in sources:
            plan.problems.append(f"file {document.id}: source_id names a source the file does not contain: {document.source_id}.")
        else:
            _plan_document(plan, document, sources[document.source_id])
    return plan


def _plan_folder(plan: FoldersPlan, source: FileSource, handle: str | None) -> None:
    where = f"source {source.id} ({source.name!r})"
    if _has_nul(source.model_dump()):
        plan.problems.append(f"{where}: it holds a NUL character, which cannot be stored.")
        return
    config = source.embedding_config or {}
    fields = {
        "name": source.name,
        "description": source.description,
        "instructions": source.instructions,
        "metadata": source.metadata or {},
        "embedding": handle,
        "embedding_chunk_size": source.embedding_chunk_size or config.get("embedding_chunk_size"),
    }
    try:
        plan.folders[source.id] = FolderCreate.model_validate(fields)
    except ValidationError as error:
        plan.problems += [f"{where}: {'.'.join(map(str, item['loc']))}: {item['msg']}" for item in error.errors()]


def _folder_handle(plan: FoldersPlan, file: AgentFile, source: FileSource, options: ImportOptions) -> str | None:
    """As for agents (plan._embedding_fields): the import's choice, else a memvm file's own model,
    else the server's default (Letta's vectors are not in the file, and its model may be out of reach)."""
    named = source.embedding or (source.embedding_config or {}).get("handle")
    if options.embedding or file.written_by_memvm:
        return options.embedding or named
    if named and named.lower() != DEFAULT_EMBEDDING_HANDLE.lower():
        plan.notes.append(
            f"source {source.id}: embedding {named!r} replaced by the server's default {DEFAULT_EMBEDDING_HANDLE!r} "
            "(its files are embedded again); import with `embedding` to choose another."
        )
    return None


def _plan_document(plan: FoldersPlan, document: FileDocument, source: FileSource) -> None:
    where = f"file {document.id}"
    if _has_nul(document.model_dump(exclude={"content"})):
        plan.problems.append(f"{where}: it holds a NUL character outside its content, which cannot be stored.")
        return
    # Agents name a file "<folder>/<name>"; the folder may be renamed here, so only the name is kept.
    qualified = document.file_name or document.original_file_name or document.id
    try:
        name = uploads.safe_file_name(qualified.removeprefix(f"{source.name}/"))
    except DomainError as error:
        plan.problems.append(f"{where}: {error.message}")
        return
    content = document.content
    size = document.file_size if document.file_size is not None else len((content or "").encode())
    read = uploads.ReadFile(
        name=name,
        original_file_name=document.original_file_name or name,
        file_type=document.file_type or "text/plain",
        file_size=size,
        outcome=processing.Failed(_missing_text(document)),
    )
    plan.documents[document.id] = DocumentPlan(source_id=source.id, read=read, content=content)


def _missing_text(document: FileDocument) -> str:
    if document.processing_status == "error" and document.error_message:
        return f"{document.error_message} (before it was exported); upload the file again."
    return "the agent file holds no text for this file (it had none when exported); upload the file again."


def _has_nul(value: Any) -> bool:
    """A NUL character anywhere in `value`: PostgreSQL's text and JSON cannot hold one. (The reader
    has already replaced lone surrogates.)"""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def check_agent(plan: FoldersPlan, file: AgentFile, agent: FileAgent, where: str) -> None:
    """The agent's folders and views must name the file's sources and files, each view a file of one
    of the agent's folders, at most once."""
    sources = {source.id for source in file.sources}
    of_source = {document.id: document.source_id for document in file.files}
    folder_ids = agent_folder_ids(agent)
    if unknown := [i for i in folder_ids if i not in sources]:
        plan.problems.append(f"{where}: source_ids names sources the file does not contain: {', '.join(unknown)}.")
    seen: set[str] = set()
    for index, view in enumerate(agent.files_agents or ()):
        at = f"{where}: files_agents[{index}]"
        if view.file_id not in of_source:
            plan.problems.append(f"{at}: file_id names a file the file does not contain: {view.file_id}.")
        elif of_source[view.file_id] not in folder_ids:
            plan.problems.append(
                f"{at}: {view.file_id} is a file of {of_source[view.file_id]}, which is not in the agent's source_ids; "
                "add it there or drop the entry."
            )
        elif view.file_id in seen:
            plan.problems.append(f"{at}: {view.file_id} is listed twice; an agent has one view of a file.")
        seen.add(view.file_id)


def agent_folder_ids(agent: FileAgent) -> list[str]:
    """Letta writes `source_ids`; `folder_ids` is its newer name."""
    return list(dict.fromkeys([*(agent.source_ids or ()), *(agent.folder_ids or ())]))


def read_documents(plan: FoldersPlan) -> None:
    """Each file's text as an upload of it would read, cut into its folder's chunks. Blocking: run
    in a thread, before the transaction."""
    for document in plan.documents.values():
        if document.content is not None and document.source_id in plan.folders:
            chunk_size = plan.folders[document.source_id].chunk_size()
            document.read = replace(document.read, outcome=_read(document.content, chunk_size))


def _read(content: str, chunk_size: int) -> processing.Parsed | processing.Failed:
    try:
        text = parse_document(content.encode(), "text/plain")
    except ParseError as error:
        return processing.Failed(error.reason)
    return processing.chunked(text, chunk_size)


class FolderWriter:
    """Creates the planned folders with their files, then gives each imported agent its folders and
    its views as the file had them."""

    def __init__(self, session: AsyncSession, embedders: EmbedderRegistry, plan: FoldersPlan, file: AgentFile) -> None:
        self.session, self.embedders, self.plan, self.file = session, embedders, plan, file
        self.folder_of: dict[str, Folder] = {}  # file-local source id → the folder made for it
        self.file_of: dict[str, FolderFile] = {}  # file-local file id → the file made for it

    async def create(self) -> None:
        for source_id, create in self.plan.folders.items():
            try:
                self.folder_of[source_id] = await self._folder(source_id, create)
            except DomainError as error:
                self.plan.problems.append(f"source {source_id}: {error.message}")
        for file_id, document in self.plan.documents.items():
            if document.source_id in self.folder_of:
                self.file_of[file_id] = await uploads.add_read_file(
                    self.session, self.folder_of[document.source_id], document.read
                )

    async def _folder(self, source_id: str, create: FolderCreate) -> Folder:
        name = create.name
        if await folders.list_folders(self.session, PageRequest(1), name=name):
            name = f"{name[: _NAME_CHARS - 9]}_{uuid.uuid4().hex[:8]}"
            self.plan.notes.append(f"source {source_id}: a folder named {create.name!r} exists; imported as {name!r}.")
        model = EmbeddingModel.of(self.embedders.for_handle(create.embedding_handle()))
        async with self.session.begin_nested():  # a name taken meanwhile is a problem, not a broken transaction
            return await folders.create_folder(self.session, create.model_copy(update={"name": name}), model)

    async def give(self, agent_id: str, agent: FileAgent) -> None:
        """Attach the agent's folders (which brings the file tools), then set its views as the file had them."""
        folder_ids = [self.folder_of[i].id for i in agent_folder_ids(agent) if i in self.folder_of]
        for folder_id in folder_ids:
            await folders.attach_folder(self.session, agent_id, folder_id)
        if not folder_ids:
            return
        kept = [view for view in agent.files_agents or () if view.file_id in self.file_of]
        for view in kept:
            if self.file_of[view.file_id].processing_status == "error":
                self.plan.notes.append(f"agent {agent.id}: {view.file_id} has no text, so its view of it was not kept.")
        await views.restore_views(self.session, agent_id, [self._kept(view) for view in kept])

    def _kept(self, view: FileAttachment) -> views.KeptView:
        """memvm's own windows are kept as they were; Letta's (its whole file, in its own numbering)
        are rendered again from the text."""
        accessed = view.last_accessed_at or _LONG_AGO
        return views.KeptView(
            file_id=self.file_of[view.file_id].id,
            is_open=view.is_open,
            start_line=view.start_line if self.file.written_by_memvm else None,
            end_line=view.end_line if self.file.written_by_memvm else None,
            text=view.visible_content if self.file.written_by_memvm else None,
            last_accessed_at=accessed if accessed.tzinfo else accessed.replace(tzinfo=UTC),
        )
