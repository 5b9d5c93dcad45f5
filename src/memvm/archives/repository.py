"""All archive and passage SQL."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, delete, func, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.dml import rows_affected
from memvm.db.tenancy import owned
from memvm.orm import Agent, AgentArchive, Archive, Passage


@dataclass(frozen=True)
class SearchScope:
    """What searching an agent's archival memory needs to know about the agent."""

    embedding: str | None  # the agent's embedding handle
    timezone: str
    archive_ids: list[str]


def archives_query(*, name: str | None, agent_id: str | None) -> Select[Archive]:
    query = select(Archive)
    if name is not None:
        query = query.where(Archive.name == name)
    if agent_id is not None:
        query = query.join(AgentArchive, AgentArchive.archive_id == Archive.id).where(AgentArchive.agent_id == agent_id)
    return query


async def archives_of(session: AsyncSession, agent_id: str) -> list[Archive]:
    query = archives_query(name=None, agent_id=agent_id).order_by(AgentArchive.position)
    return list(await session.scalars(query))


async def search_scope(session: AsyncSession, agent_id: str) -> SearchScope | None:
    """One round trip: the agent's embedding handle, timezone and archives (None: no such agent)."""
    archive_ids = func.array_remove(func.array_agg(aggregate_order_by(AgentArchive.archive_id, AgentArchive.position)), None)
    query = (
        select(Agent.embedding, Agent.timezone, archive_ids)
        .outerjoin(AgentArchive, AgentArchive.agent_id == Agent.id)
        .where(Agent.id == agent_id)
        .group_by(Agent.organization_id, Agent.id)  # the agent's primary key: its other columns follow
    )
    row = (await session.execute(query)).first()
    return None if row is None else SearchScope(row[0], row[1], list(row[2]))


async def all_archives(session: AsyncSession) -> list[Archive]:
    return list(await session.scalars(select(Archive)))


async def agent_ids_of(session: AsyncSession, archive_id: str) -> list[str]:
    return list(await session.scalars(select(AgentArchive.agent_id).where(AgentArchive.archive_id == archive_id)))


async def link(session: AsyncSession, agent_id: str, archive_id: str) -> AgentArchive | None:
    return await owned(session, AgentArchive, agent_id, archive_id)


async def unlink(session: AsyncSession, agent_id: str, archive_id: str) -> int:
    return await rows_affected(
        session, delete(AgentArchive).where(AgentArchive.agent_id == agent_id, AgentArchive.archive_id == archive_id)
    )


def agent_archive_ids(agent_id: str) -> Select[str]:
    return select(AgentArchive.archive_id).where(AgentArchive.agent_id == agent_id)


async def passage_of_agent(session: AsyncSession, agent_id: str, passage_id: str) -> Passage | None:
    query = select(Passage).where(Passage.id == passage_id, Passage.archive_id.in_(agent_archive_ids(agent_id)))
    return await session.scalar(query)


async def agent_passages(
    session: AsyncSession,
    agent_id: str,
    *,
    search: str | None,
    limit: int,
    ascending: bool,
    before: datetime | None,
    after: datetime | None,
) -> list[Passage]:
    query = select(Passage).where(Passage.archive_id.in_(agent_archive_ids(agent_id)))
    if search:
        query = query.where(Passage.text.icontains(search, autoescape=True))
    if before is not None:
        query = query.where(Passage.created_at < before)
    if after is not None:
        query = query.where(Passage.created_at > after)
    order = (Passage.created_at.asc(), Passage.id.asc()) if ascending else (Passage.created_at.desc(), Passage.id.desc())
    return list(await session.scalars(query.order_by(*order).limit(limit)))


async def delete_passages(session: AsyncSession, archive_id: str, passage_ids: Sequence[str]) -> int:
    return await rows_affected(session, delete(Passage).where(Passage.archive_id == archive_id, Passage.id.in_(passage_ids)))


async def passages_of(session: AsyncSession, archive_id: str) -> list[Passage]:
    query = select(Passage).where(Passage.archive_id == archive_id).order_by(Passage.created_at, Passage.id)
    return list(await session.scalars(query))
