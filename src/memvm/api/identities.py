"""Identities (Letta's): who agents and blocks belong to, by the caller's own key for them."""

from typing import Annotated

from fastapi import Depends, Path, Query, Request

from memvm.agents import service as agents
from memvm.agents.schemas import AgentRead
from memvm.agents.views import describe
from memvm.api.deps import AgentId, BlockId, TransactionDep, included_relations, page_params
from memvm.api.routers import api_router
from memvm.api.schemas import NULL_ANSWER
from memvm.blocks import service as blocks
from memvm.blocks.schemas import BlockRead
from memvm.db.pagination import PageRequest
from memvm.identities import service
from memvm.identities.schemas import IdentityCreate, IdentityProperty, IdentityRead, IdentityType, IdentityUpdate
from memvm.ids import id_pattern

router = api_router(tags=["identities"])
IdentityId = Annotated[str, Path(pattern=id_pattern("identity"), description="identity-<uuid4>")]
PageDep = Annotated[PageRequest, Depends(page_params(50, "desc"))]  # Letta's defaults


@router.post("/v1/identities/", response_model=IdentityRead)
async def create_identity(body: IdentityCreate, tx: TransactionDep) -> IdentityRead:
    """Create an identity; its identifier_key must be new in the organization (else 409)."""
    async with tx() as session:
        return await service.create_identity(session, body)


@router.put("/v1/identities/", response_model=IdentityRead)
async def upsert_identity(body: IdentityCreate, tx: TransactionDep) -> IdentityRead:
    """Create the identity with this identifier_key, or replace the one there: its name, type,
    properties, agents and blocks become the ones given."""
    async with tx() as session:
        return await service.upsert_identity(session, body)


@router.get("/v1/identities/", response_model=list[IdentityRead])
async def list_identities(
    tx: TransactionDep,
    page: PageDep,
    name: Annotated[str | None, Query(description="Case-insensitive substring of the name.")] = None,
    project_id: str | None = None,
    identifier_key: str | None = None,
    identity_type: IdentityType | None = None,
) -> list[IdentityRead]:
    """Identities, newest first by default."""
    async with tx() as session:
        return await service.list_identities(
            session, page, name=name, project_id=project_id, identifier_key=identifier_key, identity_type=identity_type
        )


@router.get("/v1/identities/count", response_model=int)
async def count_identities(tx: TransactionDep) -> int:
    """How many identities the organization has."""
    async with tx() as session:
        return await service.count_identities(session)


@router.get("/v1/identities/{identity_id}", response_model=IdentityRead)
async def retrieve_identity(identity_id: IdentityId, tx: TransactionDep) -> IdentityRead:
    """One identity, with the ids of its agents and blocks."""
    async with tx() as session:
        return await service.get_identity(session, identity_id)


@router.patch("/v1/identities/{identity_id}", response_model=IdentityRead)
async def update_identity(identity_id: IdentityId, body: IdentityUpdate, tx: TransactionDep) -> IdentityRead:
    """Change the fields given: properties merge by key, agent_ids and block_ids are added to the
    identity's (as Letta's update; PUT /v1/identities/ replaces them)."""
    async with tx() as session:
        return await service.update_identity(session, identity_id, body)


@router.put("/v1/identities/{identity_id}/properties", response_model=IdentityRead)
async def upsert_identity_properties(
    identity_id: IdentityId, properties: list[IdentityProperty], tx: TransactionDep
) -> IdentityRead:
    """Replace the identity's properties with these."""
    async with tx() as session:
        return await service.replace_properties(session, identity_id, properties)


@router.delete("/v1/identities/{identity_id}", responses=NULL_ANSWER)
async def delete_identity(identity_id: IdentityId, tx: TransactionDep) -> None:
    """Delete the identity; its agents and blocks remain."""
    async with tx() as session:
        await service.delete_identity(session, identity_id)


@router.get("/v1/identities/{identity_id}/agents", response_model=list[AgentRead])
async def list_identity_agents(
    request: Request,
    identity_id: IdentityId,
    tx: TransactionDep,
    page: PageDep,
    include: Annotated[list[str] | None, Query(description="Relations to include, e.g. agent.blocks.")] = None,
) -> list[AgentRead]:
    """The agents that belong to the identity, newest first by default."""
    async with tx() as session:
        await service.require(session, identity_id)
        found = await agents.list_agents(session, page, among=service.member_ids_query("agent", identity_id=identity_id))
        return await describe(session, found, include=included_relations(request, include))


@router.get("/v1/identities/{identity_id}/blocks", response_model=list[BlockRead])
async def list_identity_blocks(identity_id: IdentityId, tx: TransactionDep, page: PageDep) -> list[BlockRead]:
    """The blocks that belong to the identity, newest first by default."""
    async with tx() as session:
        await service.require(session, identity_id)
        found = await blocks.list_blocks(session, page, among=service.member_ids_query("block", identity_id=identity_id))
        return [BlockRead.of(block) for block in found]


@router.patch("/v1/agents/{agent_id}/identities/attach/{identity_id}", responses=NULL_ANSWER)
async def attach_identity_to_agent(agent_id: AgentId, identity_id: IdentityId, tx: TransactionDep) -> None:
    """The agent belongs to the identity from now on; attaching it again changes nothing."""
    async with tx() as session:
        await service.attach(session, identity_id, "agent", agent_id)


@router.patch("/v1/agents/{agent_id}/identities/detach/{identity_id}", responses=NULL_ANSWER)
async def detach_identity_from_agent(agent_id: AgentId, identity_id: IdentityId, tx: TransactionDep) -> None:
    """The agent no longer belongs to the identity; the identity remains."""
    async with tx() as session:
        await service.detach(session, identity_id, "agent", agent_id)


@router.patch("/v1/blocks/{block_id}/identities/attach/{identity_id}", response_model=BlockRead)
async def attach_identity_to_block(block_id: BlockId, identity_id: IdentityId, tx: TransactionDep) -> BlockRead:
    """The block belongs to the identity from now on; attaching it again changes nothing."""
    async with tx() as session:
        await service.attach(session, identity_id, "block", block_id)
        return BlockRead.of(await blocks.get_block(session, block_id))


@router.patch("/v1/blocks/{block_id}/identities/detach/{identity_id}", response_model=BlockRead)
async def detach_identity_from_block(block_id: BlockId, identity_id: IdentityId, tx: TransactionDep) -> BlockRead:
    """The block no longer belongs to the identity; the identity remains."""
    async with tx() as session:
        await service.detach(session, identity_id, "block", block_id)
        return BlockRead.of(await blocks.get_block(session, block_id))
