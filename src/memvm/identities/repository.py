"""All identity SQL."""

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.tenancy import organization_of
from memvm.orm import Agent, Block, Identity, IdentityAgent, IdentityBlock

# The link table of each kind of member, and the column that names the member.
LINKS: dict[str, tuple[type[IdentityAgent] | type[IdentityBlock], Any]] = {
    "agent": (IdentityAgent, IdentityAgent.agent_id),
    "block": (IdentityBlock, IdentityBlock.block_id),
}
_MEMBERS: dict[str, type[Agent] | type[Block]] = {"agent": Agent, "block": Block}


def identities_query(
    *, name: str | None, project_id: str | None, identifier_key: str | None, identity_type: str | None
) -> Select[Identity]:
    query = select(Identity)
    if name:
        query = query.where(Identity.name.icontains(name, autoescape=True))
    for column, value in (
        (Identity.project_id, project_id),
        (Identity.identifier_key, identifier_key),
        (Identity.identity_type, identity_type),
    ):
        if value is not None:
            query = query.where(column == value)
    return query


async def get(session: AsyncSession, identity_id: str, *, lock: bool = False) -> Identity | None:
    query = select(Identity).where(Identity.id == identity_id).execution_options(populate_existing=True)
    return await session.scalar(query.with_for_update(key_share=True) if lock else query)


async def count(session: AsyncSession) -> int:
    return await session.scalar(select(func.count(Identity.id))) or 0


async def by_key(session: AsyncSession, identifier_key: str) -> Identity | None:
    """The identity with this key, locked for an upsert."""
    return await session.scalar(select(Identity).where(Identity.identifier_key == identifier_key).with_for_update(key_share=True))


async def share_members(session: AsyncSession, kind: str, member_ids: Sequence[str]) -> set[str]:
    """Those of these agents or blocks that exist, locked against deletion until the links are written."""
    model = _MEMBERS[kind]
    query = select(model.id).where(model.id.in_(list(member_ids))).order_by(model.id).with_for_update(read=True, key_share=True)
    return set(await session.scalars(query))


async def share_identities(session: AsyncSession, identity_ids: Sequence[str]) -> set[str]:
    query = select(Identity.id).where(Identity.id.in_(list(identity_ids))).order_by(Identity.id)
    return set(await session.scalars(query.with_for_update(read=True, key_share=True)))


async def link(session: AsyncSession, kind: str, pairs: Sequence[tuple[str, str]]) -> None:
    """Link (identity id, member id) pairs; a link already there stays as it is."""
    if not pairs:
        return
    table, column = LINKS[kind]
    owner = organization_of(session.sync_session)  # a Core INSERT is not stamped as ORM rows are
    rows = [{"identity_id": i, column.key: member, "organization_id": owner} for i, member in pairs]
    await session.execute(insert(table).values(rows).on_conflict_do_nothing())


async def unlink(session: AsyncSession, kind: str, *, identity_id: str | None = None, member_id: str | None = None) -> None:
    """Drop the links of an identity, of a member, or the one between both."""
    table, column = LINKS[kind]
    statement = delete(table)
    if identity_id is not None:
        statement = statement.where(table.identity_id == identity_id)
    if member_id is not None:
        statement = statement.where(column == member_id)
    await session.execute(statement)


async def member_ids(session: AsyncSession, kind: str, identity_ids: Sequence[str]) -> dict[str, list[str]]:
    """Each identity's agents (or blocks), in id order, in one query."""
    table, column = LINKS[kind]
    by_identity: dict[str, list[str]] = {identity_id: [] for identity_id in identity_ids}
    query = select(table.identity_id, column).where(table.identity_id.in_(list(identity_ids))).order_by(column)
    for identity_id, member_id in await session.execute(query):
        by_identity[identity_id].append(member_id)
    return by_identity


async def of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> list[tuple[str, Identity]]:
    """(agent id, identity) for each identity of these agents, oldest identity first."""
    query = (
        select(IdentityAgent.agent_id, Identity)
        .join(Identity, Identity.id == IdentityAgent.identity_id)
        .where(IdentityAgent.agent_id.in_(list(agent_ids)))
        .order_by(Identity.created_at, Identity.id)
    )
    return [(agent_id, identity) for agent_id, identity in await session.execute(query)]


def members_query(kind: str, *, identity_id: str | None, identifier_keys: Sequence[str] = ()) -> Select[tuple[str]]:
    """Ids of the agents (or blocks) of this identity and/or of identities with these keys."""
    table, column = LINKS[kind]
    query = select(column)
    if identity_id is not None:
        query = query.where(table.identity_id == identity_id)
    if identifier_keys:
        keyed = select(Identity.id).where(Identity.identifier_key.in_(list(identifier_keys)))
        query = query.where(table.identity_id.in_(keyed))
    return query
