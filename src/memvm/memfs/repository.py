"""All MemFS SQL: the agent's commit log, its git objects, its files that are not blocks."""

from collections.abc import Collection, Iterable
from typing import Any

from dulwich.objects import ShaFile
from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.tenancy import organization_of
from memvm.memfs.objects import from_raw
from memvm.orm import MemfsCommit, MemfsFile, MemfsObject

_LOCK_CLASS = 0x6D66  # namespaces MemFS's advisory locks among others'


async def lock_repository(session: AsyncSession, agent_id: str) -> None:
    """One writer of an agent's repository at a time, until the transaction ends."""
    await session.execute(select(func.pg_advisory_xact_lock(_LOCK_CLASS, func.hashtext(agent_id))))


async def head(session: AsyncSession, agent_id: str) -> MemfsCommit | None:
    query = select(MemfsCommit).where(MemfsCommit.agent_id == agent_id).order_by(MemfsCommit.seq.desc()).limit(1)
    return await session.scalar(query)


def append_commit(session: AsyncSession, agent_id: str, seq: int, sha: bytes, blocks: dict[str, Any]) -> None:
    session.add(MemfsCommit(agent_id=agent_id, seq=seq, sha=sha.decode(), blocks=blocks))


async def store_objects(session: AsyncSession, agent_id: str, objects: Iterable[ShaFile]) -> None:
    rows = {item.id: item for item in objects}
    if not rows:
        return
    owner = organization_of(session.sync_session)  # a Core INSERT is not stamped as ORM rows are
    values = [
        {
            "organization_id": owner,
            "agent_id": agent_id,
            "sha": sha.decode(),
            "type_num": item.type_num,
            "data": item.as_raw_string(),
        }
        for sha, item in rows.items()
    ]
    stamped = [{"organization_id": owner} | value for value in values]
    await session.execute(insert(MemfsObject).values(stamped).on_conflict_do_nothing())


async def object_ids(session: AsyncSession, agent_id: str) -> list[bytes]:
    return [sha.encode() for sha in await session.scalars(select(MemfsObject.sha).where(MemfsObject.agent_id == agent_id))]


async def objects_of(session: AsyncSession, agent_id: str, shas: Collection[bytes]) -> dict[bytes, ShaFile]:
    """The objects with these ids, parsed."""
    query = select(MemfsObject.type_num, MemfsObject.data).where(
        MemfsObject.agent_id == agent_id, MemfsObject.sha.in_([sha.decode() for sha in shas])
    )
    return {item.id: item for item in (from_raw(type_num, data) for type_num, data in await session.execute(query))}


async def files_of(session: AsyncSession, agent_id: str) -> list[MemfsFile]:
    return list(await session.scalars(select(MemfsFile).where(MemfsFile.agent_id == agent_id)))


async def put_file(session: AsyncSession, agent_id: str, path: str, mode: int, blob_sha: bytes) -> None:
    owner = organization_of(session.sync_session)  # a Core INSERT is not stamped as ORM rows are
    values = {"organization_id": owner, "agent_id": agent_id, "path": path, "mode": mode, "blob_sha": blob_sha.decode()}
    statement = insert(MemfsFile).values(values)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=["organization_id", "agent_id", "path"], set_={"mode": mode, "blob_sha": values["blob_sha"]}
        )
    )


async def remove_file(session: AsyncSession, agent_id: str, path: str) -> None:
    await session.execute(delete(MemfsFile).where(MemfsFile.agent_id == agent_id, MemfsFile.path == path))
