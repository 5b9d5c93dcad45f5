"""The admin API: API keys and organizations. Only the admin key (or local mode) may call it; an
organization's key gets 403."""

from typing import Annotated

from fastapi import Path, Response

from memvm.accounts import service
from memvm.accounts.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead, OrganizationRead
from memvm.api.auth import AdminDep, GateDep
from memvm.api.deps import TransactionDep
from memvm.api.routers import api_router
from memvm.ids import id_pattern

router = api_router(prefix="/v1/admin", tags=["admin"])
ApiKeyId = Annotated[str, Path(pattern=id_pattern("apikey"), description="apikey-<uuid4>")]


@router.post("/api-keys", response_model=ApiKeyCreated)
async def create_api_key(body: ApiKeyCreate, gate: GateDep, admin: AdminDep, tx: TransactionDep) -> ApiKeyCreated:
    """Create a key for an organization (created on first use). The secret `key` is in this response
    only. The first key ends local mode: from then on every request needs a key."""
    async with tx() as session:
        created = await service.create_key(session, body.organization, body.name)
    gate.key_created()
    return created


@router.get("/api-keys", response_model=list[ApiKeyRead])
async def list_api_keys(admin: AdminDep, tx: TransactionDep) -> list[ApiKeyRead]:
    """Every key, oldest first, revoked ones included; never the secrets."""
    async with tx() as session:
        return await service.list_keys(session)


@router.delete("/api-keys/{key_id}", status_code=204)
async def revoke_api_key(key_id: ApiKeyId, gate: GateDep, admin: AdminDep, tx: TransactionDep) -> Response:
    """Revoke a key; this replica refuses it from the next request on, the others as soon as the
    revocation's NOTIFY reaches them (milliseconds)."""
    async with tx() as session:
        await service.revoke_key(session, key_id)
    gate.key_revoked()
    return Response(status_code=204)


@router.get("/organizations", response_model=list[OrganizationRead])
async def list_organizations(admin: AdminDep, tx: TransactionDep) -> list[OrganizationRead]:
    """Every organization, oldest first."""
    async with tx() as session:
        return [OrganizationRead.of(org) for org in await service.list_organizations(session)]
