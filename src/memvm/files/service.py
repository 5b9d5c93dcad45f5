"""Folders and their attachment to agents. A folder's embedding model is fixed at creation, as an
archive's: its files' chunks will all be embedded with it.

The lock order of everything that touches folders, files and agents' views of them, one order for
every path so that no two transactions wait for each other in opposite orders (a deadlock, which
PostgreSQL ends by failing one of them):

    folder rows (in id order) -> file rows -> an agent's files lock (views.lock_files) -> agent row

A path may skip a step, never go back one. Attach and detach (and folder_ids of agent create and
update, and deleting an agent) share-lock the folders (lock_folders), so attaches of one folder to
several agents run side by side. Deleting a folder and uploading to it lock it FOR UPDATE; the
worker storing a file's text, and deleting a file, FOR NO KEY UPDATE. Each of these waits for an
attach of that folder, or the attach for it, so whichever commits second sees the other's rows (an
attach the new file, the worker the new link). A turn's file tools take only an agent's files lock,
then its row."""

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.conflicts import flush_or_conflict
from memvm.db.pagination import PageRequest, fetch_page
from memvm.db.tenancy import owned
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import Conflict, NotFound
from memvm.files import repository, views
from memvm.files.schemas import FolderCreate, FolderUpdate
from memvm.ids import new_id
from memvm.orm import Agent, AgentFolder, Folder
from memvm.tools import service as tools
from memvm.tools.builtin import FILE_TOOLS

_NAME_CONSTRAINT = "uq_folder_organization_id_name"


async def create_folder(session: AsyncSession, data: FolderCreate, model: EmbeddingModel) -> Folder:
    folder = Folder(
        id=new_id("source"),
        name=data.name,
        description=data.description,
        instructions=data.instructions,
        embedding_model=model.model,
        embedding_dim=model.dim,
        chunk_size=data.chunk_size(),
        metadata_=data.metadata or {},
    )
    session.add(folder)
    await flush_or_conflict(session, _NAME_CONSTRAINT, _name_taken(data.name))
    return folder


async def get_folder(session: AsyncSession, folder_id: str) -> Folder:
    folder = await owned(session, Folder, folder_id)
    if folder is None:
        raise NotFound(f"Folder {folder_id!r} not found.")
    return folder


async def list_folders(session: AsyncSession, page: PageRequest, *, name: str | None) -> list[Folder]:
    return await fetch_page(session, repository.folders_query(name=name), Folder, page)


async def update_folder(session: AsyncSession, folder_id: str, data: FolderUpdate) -> Folder:
    """Rename or redocument a folder. An embedding_config is accepted only if it names the folder's
    own model (clients send back what they read); changing the model would orphan the chunks."""
    folder = await get_folder(session, folder_id)
    handle = data.embedding_config.model_handle() if data.embedding_config else None
    if handle is not None and handle != folder.embedding_model:
        raise Conflict(
            f"Folder {folder_id!r} embeds with {folder.embedding_model!r}; its embedding model is fixed at creation. "
            f"Create a new folder with embedding={handle!r} instead."
        )
    for field in ("name", "description", "instructions"):
        value = getattr(data, field)
        if value is not None:
            setattr(folder, field, value)
    if data.metadata is not None:
        folder.metadata_ = data.metadata
    await flush_or_conflict(session, _NAME_CONSTRAINT, _name_taken(folder.name))
    return folder


async def delete_folder(session: AsyncSession, folder_id: str) -> None:
    """Delete a folder: its files, their chunks, agents' views of them and its links to agents go
    with it (ON DELETE CASCADE); the agents it was attached to are recompiled without it."""
    folder = await repository.lock_folder(session, folder_id)  # first, as an upload locks it
    if folder is None:
        raise NotFound(f"Folder {folder_id!r} not found.")
    await repository.lock_files_of_folder(session, folder.id)
    await views.drop_folder(session, folder)


async def agents_of_folder(session: AsyncSession, folder_id: str, page: PageRequest) -> list[str]:
    """Ids of the agents the folder is attached to."""
    await get_folder(session, folder_id)
    agents: list[Agent] = await fetch_page(session, repository.agents_of_folder_query(folder_id), Agent, page)
    return [agent.id for agent in agents]


async def folders_of_agent(session: AsyncSession, agent_id: str, page: PageRequest) -> list[Folder]:
    return await fetch_page(session, repository.folders_of_agent_query(agent_id), Folder, page)


async def folders_of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Folder]]:
    """Each agent's folders in the order they were attached, in one query."""
    return await repository.of_agents(session, agent_ids)


async def lock_folders(session: AsyncSession, folder_ids: Sequence[str], *, attached_to: str | None = None) -> None:
    """Share-lock these folders before anything else (see the module's docstring). With `attached_to`,
    for a change of that agent's folders (an agent update, its deletion): the folders attached to it
    too (an attached folder deleted meanwhile is simply gone), then the agent's files lock. An unknown
    id of `folder_ids` is a NotFound naming every unknown one."""
    wanted = list(dict.fromkeys(folder_ids))
    attached = await attached_folder_ids(session, attached_to) if attached_to is not None else []
    locking = sorted({*wanted, *attached})
    found = await repository.share_folders(session, locking) if locking else set()
    if missing := [folder_id for folder_id in wanted if folder_id not in found]:
        raise NotFound(f"Folder {missing[0]!r} not found." if len(missing) == 1 else f"Folders not found: {', '.join(missing)}.")
    if attached_to is not None:
        await views.lock_files(session, attached_to)


async def attached_folder_ids(session: AsyncSession, agent_id: str) -> list[str]:
    return [folder.id for folder in (await repository.of_agents(session, [agent_id]))[agent_id]]


async def attach_folder(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    """Attach a folder to an agent; attaching it again changes nothing. The caller has locked the
    folder (lock_folders), then the agent's files lock, then the agent row: the module's lock order."""
    await views.lock_files(session, agent_id)  # attaches and detaches of one agent take turns
    if await repository.link(session, agent_id, folder_id) is None:
        session.add(AgentFolder(agent_id=agent_id, folder_id=folder_id))
        await session.flush()
        await tools.attach_builtins(session, agent_id, FILE_TOOLS)  # as Letta: folders bring the file tools
        await views.show_folder(session, agent_id, folder_id)


async def detach_folder(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    """Detach a folder from an agent; the folder remains. Locks as attach_folder."""
    await views.lock_files(session, agent_id)
    if await repository.unlink(session, agent_id, folder_id) == 0:
        raise NotFound(f"Folder {folder_id!r} is not attached to agent {agent_id!r}.")
    await views.hide_folder(session, agent_id, folder_id)
    if not (await repository.of_agents(session, [agent_id]))[agent_id]:
        await tools.detach_builtins(session, agent_id, FILE_TOOLS)  # the last folder takes them away


async def set_folders(session: AsyncSession, agent_id: str, folder_ids: Sequence[str]) -> None:
    """Make the agent's folders exactly these (folder_ids of agent create and update), each through
    attach_folder/detach_folder so views and file tools follow. The new ones are attached first, so
    the file tools go only if no folder remains. The caller has locked, in the module's order, these
    folders and those attached (lock_folders), the agent's files lock and the agent row."""
    wanted = list(dict.fromkeys(folder_ids))
    await views.lock_files(session, agent_id)  # before reading the agent's folders (see attach_folder)
    current = await attached_folder_ids(session, agent_id)
    for folder_id in wanted:
        await attach_folder(session, agent_id, folder_id)
    for folder_id in current:
        if folder_id not in wanted:
            await detach_folder(session, agent_id, folder_id)


def _name_taken(name: str) -> str:
    return f"A folder named {name!r} already exists in this organization; choose another name or update that folder."
