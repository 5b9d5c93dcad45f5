"""All SQL of agents' views of files (agent_file rows): see views.py for what they mean."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.tenancy import owned
from memvm.orm import Agent, AgentFile, AgentFolder, Folder, FolderFile

_LOCK_CLASS = 0x6D46  # namespaces the agent-files advisory locks among others'


async def lock_agent_files(session: AsyncSession, agent_id: str) -> None:
    """One change of an agent's open files at a time, until the transaction ends: the LRU decisions
    of two concurrent opens would otherwise both see a free place. Taken after the folder and file
    rows and before the agent row (which the recompile locks): the lock order of files/service.py."""
    await session.execute(select(func.pg_advisory_xact_lock(_LOCK_CLASS, func.hashtext(agent_id))))


async def files_of_agent(session: AsyncSession, agent_id: str) -> list[tuple[AgentFile, str]]:
    """The agent's files with their names, least recently used first."""
    query = (
        select(AgentFile, FolderFile.file_name)
        .join(FolderFile, FolderFile.id == AgentFile.file_id)
        .where(AgentFile.agent_id == agent_id)
        .order_by(AgentFile.last_accessed_at, AgentFile.id)
        .execution_options(populate_existing=True)
    )
    return [(row, name) for row, name in await session.execute(query)]


async def contents(session: AsyncSession, file_ids: Sequence[str]) -> dict[str, str]:
    """The parsed text of each file (only files that have one)."""
    query = select(FolderFile.id, FolderFile.content).where(FolderFile.id.in_(file_ids), FolderFile.content.is_not(None))
    return {file_id: content or "" for file_id, content in await session.execute(query)}


async def processed_files(session: AsyncSession, folder_id: str) -> list[FolderFile]:
    """The folder's files that have their text (not their text itself), oldest first."""
    query = (
        select(FolderFile)
        .where(FolderFile.folder_id == folder_id, FolderFile.content.is_not(None))
        .order_by(FolderFile.created_at, FolderFile.id)
    )
    return list(await session.scalars(query))


async def file(session: AsyncSession, file_id: str) -> FolderFile | None:
    return await owned(session, FolderFile, file_id)


async def is_attached(session: AsyncSession, agent_id: str, folder_id: str) -> bool:
    return await owned(session, AgentFolder, agent_id, folder_id) is not None


async def agents_reading(session: AsyncSession, folder_id: str) -> list[str]:
    """Ids of the agents the folder is attached to."""
    return list(await session.scalars(select(AgentFolder.agent_id).where(AgentFolder.folder_id == folder_id)))


async def agent(session: AsyncSession, agent_id: str) -> Agent | None:
    return await owned(session, Agent, agent_id)


async def delete_views_of_files(session: AsyncSession, file_ids: Sequence[str]) -> list[str]:
    """Ids of the agents that had views of these files."""
    query = delete(AgentFile).where(AgentFile.file_id.in_(file_ids)).returning(AgentFile.agent_id)
    return sorted(set(await session.scalars(query)))


async def delete_views_of_folder(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    await session.execute(delete(AgentFile).where(AgentFile.agent_id == agent_id, AgentFile.folder_id == folder_id))


async def touch(session: AsyncSession, agent_id: str, file_ids: Sequence[str], moment: datetime) -> None:
    query = update(AgentFile).where(AgentFile.agent_id == agent_id, AgentFile.file_id.in_(file_ids))
    await session.execute(query.values(last_accessed_at=moment).execution_options(synchronize_session=False))


class ByFileUpload:
    """The listing order of an agent's files, for fetch_page: their file's upload time, then the view's id."""

    created_at = (
        select(FolderFile.created_at)
        .where(FolderFile.id == AgentFile.file_id)
        .correlate(AgentFile)
        .scalar_subquery()
        .label("created_at")
    )
    id = AgentFile.id


def listing_query(agent_id: str, is_open: bool | None) -> Select[Any]:
    query = select(AgentFile).where(AgentFile.agent_id == agent_id)
    return query if is_open is None else query.where(AgentFile.is_open.is_(is_open))


async def names(session: AsyncSession, rows: Sequence[AgentFile]) -> dict[str, tuple[str, str]]:
    """Per file id of `rows`: the file's name and its folder's name."""
    query = (
        select(FolderFile.id, FolderFile.file_name, Folder.name)
        .join(Folder, Folder.id == FolderFile.folder_id)
        .where(FolderFile.id.in_([row.file_id for row in rows]))
    )
    return {file_id: (file_name, folder_name) for file_id, file_name, folder_name in await session.execute(query)}


async def views_of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> list[tuple[AgentFile, str]]:
    """Every view of these agents with its file's name, by file name."""
    query = (
        select(AgentFile, FolderFile.file_name)
        .join(FolderFile, FolderFile.id == AgentFile.file_id)
        .where(AgentFile.agent_id.in_(list(agent_ids)))
        .order_by(FolderFile.file_name)
    )
    return [(row, name) for row, name in await session.execute(query)]
