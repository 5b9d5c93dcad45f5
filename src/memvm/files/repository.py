"""All folder SQL."""

from collections.abc import Sequence

from sqlalchemy import Select, delete, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import undefer

from memvm.db.dml import rows_affected
from memvm.db.tenancy import owned
from memvm.orm import Agent, AgentFolder, Folder, FolderFile


def folders_query(*, name: str | None) -> Select[Folder]:
    query = select(Folder)
    return query if name is None else query.where(Folder.name == name)


def folders_of_agent_query(agent_id: str) -> Select[Folder]:
    return select(Folder).join(AgentFolder, AgentFolder.folder_id == Folder.id).where(AgentFolder.agent_id == agent_id)


def agents_of_folder_query(folder_id: str) -> Select[Agent]:
    return select(Agent).join(AgentFolder, AgentFolder.agent_id == Agent.id).where(AgentFolder.folder_id == folder_id)


async def of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[Folder]]:
    """Each agent's folders in attachment order, in one query."""
    by_agent: dict[str, list[Folder]] = {agent_id: [] for agent_id in agent_ids}
    query = (
        select(AgentFolder.agent_id, Folder)
        .join(Folder, Folder.id == AgentFolder.folder_id)
        .where(AgentFolder.agent_id.in_(list(agent_ids)))
        .order_by(AgentFolder.position)
    )
    for agent_id, folder in await session.execute(query):
        by_agent[agent_id].append(folder)
    return by_agent


async def link(session: AsyncSession, agent_id: str, folder_id: str) -> AgentFolder | None:
    return await owned(session, AgentFolder, agent_id, folder_id)


async def unlink(session: AsyncSession, agent_id: str, folder_id: str) -> int:
    return await rows_affected(
        session, delete(AgentFolder).where(AgentFolder.agent_id == agent_id, AgentFolder.folder_id == folder_id)
    )


async def lock_folder(session: AsyncSession, folder_id: str) -> Folder | None:
    """The folder, locked until the transaction ends: uploads to one folder take their names in turn."""
    return await session.scalar(select(Folder).where(Folder.id == folder_id).with_for_update())


async def share_folders(session: AsyncSession, folder_ids: Sequence[str]) -> set[str]:
    """Those of these folders that exist, FOR SHARE in id order (the rows are sorted, then locked)."""
    query = select(Folder.id).where(Folder.id.in_(list(folder_ids))).order_by(Folder.id).with_for_update(read=True)
    return set(await session.scalars(query))


async def lock_folder_for_files(session: AsyncSession, folder_id: str) -> bool:
    """FOR NO KEY UPDATE (key_share): waits for an attach's FOR SHARE, not for the FOR KEY SHARE of
    inserts that reference the folder. Whether it still exists."""
    query = select(Folder.id).where(Folder.id == folder_id).with_for_update(key_share=True)
    return await session.scalar(query) is not None


def files_query(folder_id: str) -> Select[FolderFile]:
    return select(FolderFile).where(FolderFile.folder_id == folder_id)


def with_content(query: Select[FolderFile]) -> Select[FolderFile]:
    """Files with their parsed text loaded (it is deferred: it can be megabytes)."""
    return query.options(undefer(FolderFile.content))


async def file_in_folder(session: AsyncSession, folder_id: str, file_id: str, *, content: bool = False) -> FolderFile | None:
    query = files_query(folder_id).where(FolderFile.id == file_id)
    return await session.scalar(with_content(query) if content else query)


async def file_by_original_name(session: AsyncSession, folder_id: str, original_file_name: str) -> FolderFile | None:
    """The oldest file of the folder uploaded under this name."""
    query = files_query(folder_id).where(FolderFile.original_file_name == original_file_name)
    return await session.scalar(query.order_by(FolderFile.created_at).limit(1))


async def file_names_starting(session: AsyncSession, folder_id: str, prefix: str) -> set[str]:
    query = select(FolderFile.file_name).where(
        FolderFile.folder_id == folder_id, FolderFile.file_name.startswith(prefix, autoescape=True)
    )
    return set(await session.scalars(query))


async def lock_files(session: AsyncSession, file_ids: Sequence[str]) -> None:
    """Lock files about to be deleted before anything else of theirs (agents' views) is: the file
    worker locks a file, then the agents it shows it to, so deletions lock in the same order."""
    await session.execute(select(FolderFile.id).where(FolderFile.id.in_(file_ids)).with_for_update())


async def lock_files_of_folder(session: AsyncSession, folder_id: str) -> list[str]:
    """Lock the folder's files (see lock_files); their ids."""
    query = select(FolderFile.id).where(FolderFile.folder_id == folder_id).with_for_update()
    return list(await session.scalars(query))


async def delete_file(session: AsyncSession, file_id: str) -> int:
    """Its chunks and agents' views of it go with it (ON DELETE CASCADE)."""
    return await rows_affected(session, delete(FolderFile).where(FolderFile.id == file_id))
