"""Folders and their attachment to agents. Operations on an agent's folders take the agent's id from
a caller that has already looked the agent up (and locked it, for attach and detach). A folder's
embedding model is fixed at creation, as an archive's: its files' chunks will all be embedded with it."""

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.conflicts import flush_or_conflict
from memvm.db.pagination import PageRequest, fetch_page
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import Conflict, NotFound
from memvm.files import repository
from memvm.files.schemas import FolderCreate, FolderUpdate
from memvm.ids import new_id
from memvm.orm import Agent, AgentFolder, Folder

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
    folder = await session.get(Folder, folder_id)
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
    """Delete a folder; its links to agents go with it (ON DELETE CASCADE)."""
    await session.delete(await get_folder(session, folder_id))
    await session.flush()


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


async def attach_folder(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    """Attach a folder to an agent; attaching it again changes nothing."""
    await get_folder(session, folder_id)
    if await repository.link(session, agent_id, folder_id) is None:
        session.add(AgentFolder(agent_id=agent_id, folder_id=folder_id))
        await session.flush()


async def detach_folder(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    """Detach a folder from an agent; the folder remains."""
    await get_folder(session, folder_id)
    if await repository.unlink(session, agent_id, folder_id) == 0:
        raise NotFound(f"Folder {folder_id!r} is not attached to agent {agent_id!r}.")


def _name_taken(name: str) -> str:
    return f"A folder named {name!r} already exists in this organization; choose another name or update that folder."
