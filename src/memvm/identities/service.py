"""Identities and the agents and blocks that belong to them. An identifier_key is unique in its
organization. Lock order, one for every path: identity rows (in id order) -> agent or block rows;
so an agent update that sets identity_ids locks the identities before the agent row."""

from collections.abc import Sequence

from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.conflicts import flush_or_conflict
from memvm.db.pagination import PageRequest, fetch_page
from memvm.errors import Conflict, NotFound
from memvm.identities import repository
from memvm.identities.schemas import IdentityCreate, IdentityFields, IdentityProperty, IdentityRead, IdentityUpdate
from memvm.ids import new_id
from memvm.orm import Identity

_KEY_CONSTRAINT = "uq_identity_organization_id_identifier_key"


def _key_taken(identifier_key: str) -> str:
    return f"An identity with identifier_key {identifier_key!r} already exists; use PUT /v1/identities/ to update it by key."


async def create_identity(session: AsyncSession, data: IdentityCreate) -> IdentityRead:
    identity = Identity(
        id=new_id("identity"),
        identifier_key=data.identifier_key,
        name=data.name,
        identity_type=data.identity_type,
        project_id=data.project_id,
        properties=[prop.model_dump() for prop in data.properties or ()],
    )
    session.add(identity)
    await flush_or_conflict(session, _KEY_CONSTRAINT, _key_taken(data.identifier_key))
    await _set_members(session, identity.id, data, replace=True)
    return await _read(session, identity)


async def upsert_identity(session: AsyncSession, data: IdentityCreate) -> IdentityRead:
    """Create the identity with this identifier_key, or change the one there: the name and type,
    and the properties, agents and blocks given replace its own (as Letta's upsert)."""
    identity = await repository.by_key(session, data.identifier_key)
    if identity is None:
        try:
            async with session.begin_nested():  # a concurrent upsert of the key may insert it first
                return await create_identity(session, data)
        except Conflict:
            identity = await repository.by_key(session, data.identifier_key)
            if identity is None:
                raise
    return await _change(session, identity, IdentityUpdate.model_validate(data.model_dump()), replace=True)


async def update_identity(session: AsyncSession, identity_id: str, data: IdentityUpdate) -> IdentityRead:
    """Change the fields given; properties merge by key and agent_ids/block_ids are added (as Letta's PATCH)."""
    return await _change(session, await _locked(session, identity_id), data, replace=False)


async def replace_properties(session: AsyncSession, identity_id: str, properties: list[IdentityProperty]) -> IdentityRead:
    return await _change(session, await _locked(session, identity_id), IdentityUpdate(properties=properties), replace=True)


async def _change(session: AsyncSession, identity: Identity, data: IdentityUpdate, *, replace: bool) -> IdentityRead:
    for field in ("identifier_key", "name", "identity_type"):
        if (value := getattr(data, field)) is not None:
            setattr(identity, field, value)
    if data.properties is not None:
        kept = {} if replace else {prop["key"]: prop for prop in identity.properties}
        identity.properties = list((kept | {prop.key: prop.model_dump() for prop in data.properties}).values())
    await flush_or_conflict(session, _KEY_CONSTRAINT, _key_taken(identity.identifier_key))
    await _set_members(session, identity.id, data, replace=replace)
    return await _read(session, identity)


async def _set_members(session: AsyncSession, identity_id: str, data: IdentityFields, *, replace: bool) -> None:
    for kind, wanted in (("agent", data.agent_ids), ("block", data.block_ids)):
        if wanted is None:
            continue
        found = await repository.share_members(session, kind, wanted)
        if missing := [member_id for member_id in wanted if member_id not in found]:
            raise NotFound(f"{kind.capitalize()}s not found: {', '.join(missing)}.")
        if replace:
            await repository.unlink(session, kind, identity_id=identity_id)
        await repository.link(session, kind, [(identity_id, member_id) for member_id in wanted])


async def get_identity(session: AsyncSession, identity_id: str) -> IdentityRead:
    return await _read(session, await _found(session, identity_id))


async def list_identities(
    session: AsyncSession,
    page: PageRequest,
    *,
    name: str | None = None,
    project_id: str | None = None,
    identifier_key: str | None = None,
    identity_type: str | None = None,
) -> list[IdentityRead]:
    query = repository.identities_query(
        name=name, project_id=project_id, identifier_key=identifier_key, identity_type=identity_type
    )
    return await _read_all(session, await fetch_page(session, query, Identity, page))


async def delete_identity(session: AsyncSession, identity_id: str) -> None:
    """Delete the identity; its agents and blocks remain, without it."""
    await session.delete(await _locked(session, identity_id))
    await session.flush()


async def attach(session: AsyncSession, identity_id: str, kind: str, member_id: str) -> None:
    """The agent or block (`kind`) belongs to the identity from now on; attaching it again changes nothing."""
    await _locked(session, identity_id)
    await _set_members(session, identity_id, _members(kind, [member_id]), replace=False)


async def detach(session: AsyncSession, identity_id: str, kind: str, member_id: str) -> None:
    """The agent or block no longer belongs to the identity; detaching it again changes nothing."""
    await _locked(session, identity_id)
    if not await repository.share_members(session, kind, [member_id]):
        raise NotFound(f"{kind.capitalize()} {member_id!r} not found.")
    await repository.unlink(session, kind, identity_id=identity_id, member_id=member_id)


def _members(kind: str, member_ids: list[str]) -> IdentityFields:
    return IdentityFields(agent_ids=member_ids) if kind == "agent" else IdentityFields(block_ids=member_ids)


async def count_identities(session: AsyncSession) -> int:
    return await repository.count(session)


async def lock_identities(session: AsyncSession, identity_ids: Sequence[str]) -> None:
    """Share-lock these identities (first, in the module's lock order); NotFound names unknown ones."""
    found = await repository.share_identities(session, identity_ids) if identity_ids else set()
    if missing := [identity_id for identity_id in identity_ids if identity_id not in found]:
        raise NotFound(f"Identities not found: {', '.join(missing)}.")


async def set_agent_identities(session: AsyncSession, agent_id: str, identity_ids: Sequence[str]) -> None:
    """The agent belongs to exactly these identities (agent create and update's identity_ids)."""
    await lock_identities(session, identity_ids)
    await repository.unlink(session, "agent", member_id=agent_id)
    await repository.link(session, "agent", [(identity_id, agent_id) for identity_id in dict.fromkeys(identity_ids)])


async def identities_of_agents(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, list[IdentityRead]]:
    """Each agent's identities, oldest first, in three queries for all agents."""
    pairs = await repository.of_agents(session, agent_ids)
    reads = {read.id: read for read in await _read_all(session, list({identity.id: identity for _, identity in pairs}.values()))}
    by_agent: dict[str, list[IdentityRead]] = {agent_id: [] for agent_id in agent_ids}
    for agent_id, identity in pairs:
        by_agent[agent_id].append(reads[identity.id])
    return by_agent


def member_ids_query(kind: str, *, identity_id: str | None, identifier_keys: Sequence[str] = ()) -> Select[tuple[str]]:
    """Ids of the agents or blocks of an identity, or of the identities with these keys (list filters)."""
    return repository.members_query(kind, identity_id=identity_id, identifier_keys=identifier_keys)


async def require(session: AsyncSession, identity_id: str) -> None:
    """NotFound unless the identity exists (before listing its agents or blocks)."""
    await _found(session, identity_id)


async def _found(session: AsyncSession, identity_id: str, *, lock: bool = False) -> Identity:
    if (identity := await repository.get(session, identity_id, lock=lock)) is None:
        raise NotFound(f"Identity {identity_id!r} not found.")
    return identity


async def _locked(session: AsyncSession, identity_id: str) -> Identity:
    """The identity, locked for a change of it or of its links (first, in the module's lock order)."""
    return await _found(session, identity_id, lock=True)


async def _read(session: AsyncSession, identity: Identity) -> IdentityRead:
    [read] = await _read_all(session, [identity])
    return read


async def _read_all(session: AsyncSession, identities: Sequence[Identity]) -> list[IdentityRead]:
    if not identities:  # an agent without identities (most) costs no member queries
        return []
    ids = [identity.id for identity in identities]
    agents = await repository.member_ids(session, "agent", ids)
    blocks = await repository.member_ids(session, "block", ids)
    return [IdentityRead.of(identity, agent_ids=agents[identity.id], block_ids=blocks[identity.id]) for identity in identities]
