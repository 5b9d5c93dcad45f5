"""All organization and API key SQL."""

from datetime import UTC, datetime

from sqlalchemy import exists, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.dml import rows_affected
from memvm.orm import ApiKey, Organization


async def organization_named(session: AsyncSession, name: str, new_id: str) -> Organization:
    """The organization with this name, created if missing (safe under concurrent creates)."""
    await session.execute(insert(Organization).values(id=new_id, name=name).on_conflict_do_nothing(index_elements=["name"]))
    return (await session.scalars(select(Organization).where(Organization.name == name))).one()


async def organizations(session: AsyncSession) -> list[Organization]:
    return list(await session.scalars(select(Organization).order_by(Organization.created_at, Organization.id)))


async def keys_with_organizations(session: AsyncSession) -> list[tuple[ApiKey, str]]:
    query = (
        select(ApiKey, Organization.name)
        .join(Organization, Organization.id == ApiKey.organization_id)
        .order_by(ApiKey.created_at, ApiKey.id)
    )
    return [(key, name) for key, name in await session.execute(query)]


async def live_key_by_hash(session: AsyncSession, secret_sha256: str) -> ApiKey | None:
    query = select(ApiKey).where(ApiKey.secret_sha256 == secret_sha256, ApiKey.revoked_at.is_(None))
    return await session.scalar(query)


# Every process forgets the keys it verified when this is notified (accounts/key_cache.py).
REVOCATION_CHANNEL = "memvm_api_key_revoked"


async def revoke(session: AsyncSession, key_id: str) -> int:
    """Mark the key revoked and tell every process, when this transaction commits, to forget keys."""
    statement = update(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None)).values(revoked_at=datetime.now(UTC))
    revoked = await rows_affected(session, statement)
    if revoked:
        await session.execute(select(func.pg_notify(REVOCATION_CHANNEL, key_id)))
    return revoked


async def get(session: AsyncSession, key_id: str) -> ApiKey | None:
    return await session.get(ApiKey, key_id)


async def any_key(session: AsyncSession) -> bool:
    return bool(await session.scalar(select(exists().where(ApiKey.id.is_not(None)))))
