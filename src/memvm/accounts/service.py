"""API keys: high-entropy random secrets with a recognisable prefix. Only their SHA-256 is stored
(a fast hash is enough for 256-bit random secrets: there is nothing to brute-force), and a lookup
compares the digests in constant time."""

import hashlib
import hmac
import secrets

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.accounts import repository
from memvm.accounts.schemas import ApiKeyCreated, ApiKeyRead
from memvm.actors import Actor, Caller
from memvm.errors import NotFound
from memvm.ids import new_id
from memvm.orm import ApiKey, Organization

KEY_PREFIX = "mvk_"
_SHOWN_PREFIX_LENGTH = len(KEY_PREFIX) + 8


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def create_key(session: AsyncSession, organization: str, name: str) -> ApiKeyCreated:
    """A new key in the named organization (created on first use); the secret is returned only here."""
    org = await repository.organization_named(session, organization, new_id("org"))
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        id=new_id("apikey"),
        organization_id=org.id,
        name=name,
        prefix=secret[:_SHOWN_PREFIX_LENGTH],
        secret_sha256=digest(secret),
    )
    session.add(key)
    await session.flush()
    return ApiKeyCreated(**ApiKeyRead.of(key, org.name).model_dump(), key=secret)


async def list_keys(session: AsyncSession) -> list[ApiKeyRead]:
    return [ApiKeyRead.of(key, organization) for key, organization in await repository.keys_with_organizations(session)]


async def revoke_key(session: AsyncSession, key_id: str) -> None:
    """Revoked at once: every replica forgets the keys it remembered when this commits."""
    if await repository.revoke(session, key_id) == 0 and await repository.get(session, key_id) is None:
        raise NotFound(f"API key {key_id!r} not found.")


async def list_organizations(session: AsyncSession) -> list[Organization]:
    return await repository.organizations(session)


async def caller_of(session: AsyncSession, secret: str) -> Caller | None:
    """The caller a key stands for, or None for an unknown or revoked key."""
    hashed = digest(secret)
    key = await repository.live_key_by_hash(session, hashed)
    if key is None or not hmac.compare_digest(key.secret_sha256, hashed):
        return None
    return Caller(key.organization_id, Actor("api_key", key.id))


async def any_key_exists(session: AsyncSession) -> bool:
    """Once a key exists (even revoked), the server requires keys."""
    return await repository.any_key(session)
