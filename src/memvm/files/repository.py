"""All folder SQL."""

from collections.abc import Sequence

from sqlalchemy import Select, delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.dml import rows_affected
from memvm.orm import Agent, AgentFolder, Folder


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
    return await session.get(AgentFolder, (agent_id, folder_id))


async def unlink(session: AsyncSession, agent_id: str, folder_id: str) -> int:
    return await rows_affected(
        session, delete(AgentFolder).where(AgentFolder.agent_id == agent_id, AgentFolder.folder_id == folder_id)
    )
