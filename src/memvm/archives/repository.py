"""All archive and passage SQL."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

from sqlalchemy import Select, Text, bindparam, delete, func, select, true, update
from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by, insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db import direct
from memvm.db.base import Base
from memvm.db.direct import ORGANIZATION, Direct
from memvm.db.dml import rows_affected
from memvm.db.tenancy import organization_of_new_rows, owned
from memvm.orm import Agent, AgentArchive, Archive, ArchiveTag, Passage


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


_AGENTS = Base.metadata.tables[Agent.__tablename__].c
_AGENT_ARCHIVE_TABLE = Base.metadata.tables[AgentArchive.__tablename__]
_AGENT_ARCHIVES = _AGENT_ARCHIVE_TABLE.c
_SEARCH_SCOPE = Direct(  # every archival search: a direct statement (db/direct.py)
    select(
        _AGENTS.embedding,
        _AGENTS.timezone,
        func.array_remove(func.array_agg(aggregate_order_by(_AGENT_ARCHIVES.archive_id, _AGENT_ARCHIVES.position)), None).label(
            "archive_ids"
        ),
    )
    .outerjoin(
        _AGENT_ARCHIVE_TABLE,
        (_AGENT_ARCHIVES.organization_id == _AGENTS.organization_id) & (_AGENT_ARCHIVES.agent_id == _AGENTS.id),
    )
    .where(_AGENTS.organization_id == bindparam(ORGANIZATION), _AGENTS.id == bindparam("agent_id"))
    .group_by(_AGENTS.organization_id, _AGENTS.id)  # the agent's primary key: its other columns follow
)


async def search_scope(session: AsyncSession, agent_id: str) -> SearchScope | None:
    """One round trip: the agent's embedding handle, timezone and archives (None: no such agent)."""
    row = (await direct.run(session, _SEARCH_SCOPE, {"agent_id": agent_id})).first()
    return None if row is None else SearchScope(row.embedding, row.timezone, list(row.archive_ids))


async def all_archives(session: AsyncSession) -> list[Archive]:
    return list(await session.scalars(select(Archive)))


async def agent_ids_of(session: AsyncSession, archive_id: str) -> list[str]:
    return list(await session.scalars(select(AgentArchive.agent_id).where(AgentArchive.archive_id == archive_id)))


class Writer(NamedTuple):
    """What a passage write needs of its agent."""

    id: str
    name: str
    default_archive_id: str | None


# The agent a passage write inserts for: key-share locked, so it is neither deleted nor are its archives
# attached or detached (each locks it FOR UPDATE) before the write commits, yet no recompile (FOR NO KEY
# UPDATE) waits for it: the archive's counts come before any agent lock (see service.py's lock order).
_KEY_SHARED_WRITER = Direct(  # every archival insert: a direct statement (db/direct.py)
    select(*(_AGENTS[name] for name in Writer._fields))
    .where(_AGENTS.organization_id == bindparam(ORGANIZATION), _AGENTS.id == bindparam("agent_id"))
    .with_for_update(key_share=True, read=True)
)


async def lock_writer(session: AsyncSession, agent_id: str) -> Writer | None:
    """The agent, read again under its lock (see _KEY_SHARED_WRITER); None if there is no such agent."""
    row = (await direct.run(session, _KEY_SHARED_WRITER, {"agent_id": agent_id})).first()
    return None if row is None else Writer._make(row)


async def set_default_archive(session: AsyncSession, agent_id: str, archive_id: str) -> None:
    """The session's copy of the agent, if it holds one, shows it too (the ORM's UPDATE)."""
    await session.execute(update(Agent).where(Agent.id == agent_id).values(default_archive_id=archive_id))


_DEFAULT_ARCHIVE_LOCK_CLASS = 0x6D41  # namespaces these keys among memvm's other advisory locks (turn_lock.py)


async def wait_to_make_default_archive(session: AsyncSession, agent_id: str) -> None:
    """Until no other transaction is making this agent's default archive, and then until this one
    ends. A lock of the agent's row for it would be taken before the archive's, against the lock
    order, whenever a concurrent first use made the archive meanwhile: this advisory lock is one
    that no row lock waits for."""
    await session.execute(select(func.pg_advisory_xact_lock(_DEFAULT_ARCHIVE_LOCK_CLASS, func.hashtext(agent_id))))


# How each writer locks an archive's row, before the agents that read it (see service.py's lock order):
# its delete FOR UPDATE; a change of its passages FOR NO KEY UPDATE, as the update of its counts locks
# it (lock_archive_to_write); a new link to it FOR KEY SHARE, which waits only for its delete (as the
# link's foreign key would).
_ARCHIVE_ROW = select(Archive).where(Archive.id == bindparam("archive_id")).execution_options(populate_existing=True)
_ARCHIVE_LOCKS = {"delete": _ARCHIVE_ROW.with_for_update(), "link": _ARCHIVE_ROW.with_for_update(key_share=True, read=True)}


async def lock_archive(session: AsyncSession, archive_id: str, *, to: Literal["delete", "link"]) -> Archive | None:
    """The archive, locked as `to` needs it (_ARCHIVE_LOCKS); None once it is deleted."""
    return await session.scalar(_ARCHIVE_LOCKS[to], {"archive_id": archive_id})


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
    """Delete them and take them out of the archive's counts; how many there were."""
    query = delete(Passage).where(Passage.archive_id == archive_id, Passage.id.in_(passage_ids)).returning(Passage.tags)
    removed = list(await session.scalars(query))
    if removed:
        await recount(session, archive_id, removed, each=-1)
    return len(removed)


# Core statements (they name their organization themselves, as the session scopes only the ORM's).
_ARCHIVE = Archive.metadata.tables[Archive.__tablename__]
_TAGS = ArchiveTag.metadata.tables[ArchiveTag.__tablename__]
_COUNTED = (
    update(_ARCHIVE)
    .where(_ARCHIVE.c.organization_id == bindparam("organization"), _ARCHIVE.c.id == bindparam("archive"))
    # updated_at as it was: the archive's passages changed, not the archive
    .values(passage_count=_ARCHIVE.c.passage_count + bindparam("passages"), updated_at=_ARCHIVE.c.updated_at)
    .returning(_ARCHIVE.c.organization_id, _ARCHIVE.c.id)
    .cte("counted")
)
_TAG_LIST = func.unnest(bindparam("tags", type_=ARRAY(Text))).table_valued("tag").render_derived(name="tag_list")
_TAG = _TAG_LIST.c.tag
_ADDED = insert(_TAGS).from_select(
    ["organization_id", "archive_id", "tag", "passages"],
    select(_COUNTED.c.organization_id, _COUNTED.c.id, _TAG, func.count() * bindparam("each"))
    .select_from(_COUNTED)
    .join(_TAG_LIST, true())
    .group_by(_COUNTED.c.organization_id, _COUNTED.c.id, _TAG)
    .order_by(_TAG),  # every writer locks an archive's tag rows in one order: no deadlock between two
)
# One statement: the archive's count first (its row lock then orders concurrent writers of the
# archive), then each tag's, added to a row another transaction may be inserting at the same time.
_RECOUNT = _ADDED.on_conflict_do_update(
    index_elements=["organization_id", "archive_id", "tag"], set_={"passages": _TAGS.c.passages + _ADDED.excluded.passages}
).add_cte(_COUNTED)
_UNUSED_TAGS = delete(_TAGS).where(
    _TAGS.c.organization_id == bindparam("organization"),
    _TAGS.c.archive_id == bindparam("archive"),
    _TAGS.c.tag == func.any(bindparam("tags", type_=ARRAY(Text))),
    _TAGS.c.passages <= 0,
)


class ArchiveToWrite(NamedTuple):
    """What a passage write needs of its archive."""

    id: str
    embedding_model: str


_ARCHIVE_TO_WRITE = Direct(  # every archival insert: a direct statement (db/direct.py)
    select(_ARCHIVE.c.id, _ARCHIVE.c.embedding_model)
    .where(_ARCHIVE.c.organization_id == bindparam(ORGANIZATION), _ARCHIVE.c.id == bindparam("archive_id"))
    .with_for_update(key_share=True)
)


async def lock_archive_to_write(session: AsyncSession, archive_id: str) -> ArchiveToWrite | None:
    """The archive, locked as a change of its passages locks it (see _ARCHIVE_LOCKS); None once it is deleted."""
    row = (await direct.run(session, _ARCHIVE_TO_WRITE, {"archive_id": archive_id})).first()
    return None if row is None else ArchiveToWrite._make(row)


_PASSAGES = Base.metadata.tables[Passage.__tablename__]
# Every column a new passage is given (all but the computed full-text vector), as parameters: the rows
# of one insert go in one statement whatever their number (SQLAlchemy's executemany sends them as
# multi-row VALUES), with their creation times back in their order; created_at is the given one (an
# import's) or the clock's.
_NEW_PASSAGE_COLUMNS = [column.name for column in _PASSAGES.c if column.computed is None and column.name != "created_at"]
_INSERT_PASSAGES = (
    insert(_PASSAGES)
    .values(
        {name: bindparam(name, type_=_PASSAGES.c[name].type) for name in _NEW_PASSAGE_COLUMNS}
        | {"created_at": func.coalesce(bindparam("created_at", type_=_PASSAGES.c.created_at.type), func.clock_timestamp())}
    )
    .returning(_PASSAGES.c.created_at, sort_by_parameter_order=True)
)


async def insert_passages(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> list[datetime]:
    """Store new passages (each a dict of _NEW_PASSAGE_COLUMNS but the organization, and created_at or
    None) in the session's organization, without the unit of work (its flush of one 1536-d passage took
    0.63-0.71 ms of CPU, this statement 0.30-0.34). Their creation times, in order."""
    if not rows:
        return []
    organization_id = organization_of_new_rows(session.sync_session, "Passage")
    stamped = [{**row, "organization_id": organization_id} for row in rows]
    return list((await session.execute(_INSERT_PASSAGES, stamped)).scalars())


async def recount(session: AsyncSession, archive_id: str, tags_of_passages: Sequence[Sequence[str]], *, each: int) -> None:
    """Count passages with these tags into the archive (`each` 1) or out of it (-1), as they are
    inserted or deleted in this transaction; a tag no passage carries any more is dropped."""
    tags = [tag for passage_tags in tags_of_passages for tag in passage_tags]
    parameters = {
        "organization": organization_of_new_rows(session.sync_session, "ArchiveTag"),
        "archive": archive_id,
        "passages": each * len(tags_of_passages),
        "each": each,
        "tags": tags,
    }
    await session.execute(_RECOUNT, parameters)
    if each < 0 and tags:
        await session.execute(_UNUSED_TAGS, parameters)


async def passages_of(session: AsyncSession, archive_id: str) -> list[Passage]:
    query = select(Passage).where(Passage.archive_id == archive_id).order_by(Passage.created_at, Passage.id)
    return list(await session.scalars(query))
