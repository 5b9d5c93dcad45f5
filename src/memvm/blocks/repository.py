"""All block SQL."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    Integer,
    Select,
    String,
    and_,
    bindparam,
    column,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlalchemy.orm.attributes import set_committed_value

from memvm.actors import Actor
from memvm.db import direct
from memvm.db.direct import ORGANIZATION, Direct
from memvm.db.dml import json_rows, rows_affected
from memvm.db.pagination import NamePage, fetch_names
from memvm.db.tenancy import organization_of, organization_of_new_rows
from memvm.orm import AgentBlock, Block, BlockChange

_BY_ID = select(Block).where(Block.id == bindparam("block_id")).execution_options(populate_existing=True)  # built once


async def get(session: AsyncSession, block_id: str, *, lock: bool = False) -> Block | None:
    query = _BY_ID.with_for_update() if lock else _BY_ID
    return await session.scalar(query, {"block_id": block_id})


_LINK_TABLE = AgentBlock.metadata.tables[AgentBlock.__tablename__]  # Core: alone, the ORM takes this for a bulk INSERT
_BLOCK_TABLE, _CHANGE_TABLE = (Block.metadata.tables[model.__tablename__] for model in (Block, BlockChange))  # Core: direct
_CHANGE_COLUMNS = BlockChange.__mapper__.columns  # by attribute name
_LINKS = _LINK_TABLE.c
_ATTACHED_AGENTS = select(_LINKS.agent_id).where(
    _LINKS.organization_id == bindparam(ORGANIZATION), _LINKS.block_id == bindparam("block_id")
)
_ATTACHED_AGENT_IDS = Direct(_ATTACHED_AGENTS)  # a direct statement (db/direct.py)


async def attached_agent_ids(session: AsyncSession, block_id: str) -> list[str]:
    return list((await direct.run(session, _ATTACHED_AGENT_IDS, {"block_id": block_id})).scalars())


async def agents_with_label(session: AsyncSession, agent_ids: Sequence[str], label: str) -> list[str]:
    query = select(AgentBlock.agent_id).where(AgentBlock.agent_id.in_(agent_ids), AgentBlock.label == label)
    return list(await session.scalars(query))


def list_query(
    *, label: str | None, tags: Sequence[str], match_all_tags: bool, value_search: str | None, among: Select[tuple[str]] | None
) -> Select[Block]:
    query = select(Block) if among is None else select(Block).where(Block.id.in_(among))
    if label is not None:
        query = query.where(Block.label == label)
    if tags:
        query = query.where(Block.tags.contains(list(tags)) if match_all_tags else Block.tags.overlap(list(tags)))
    if value_search:
        query = query.where(Block.value.icontains(value_search, autoescape=True))
    return query


# A block's next change number: its last one's plus one. Its writers hold the block's lock first.
_PRIOR = _CHANGE_TABLE.alias("prior")
_NEXT_CHANGE_ID = (
    select(func.coalesce(func.max(_PRIOR.c.id), 0) + 1)
    .where(_PRIOR.c.organization_id == bindparam(ORGANIZATION), _PRIOR.c.block_id == bindparam("block_id"))
    .scalar_subquery()
)

# What a history row keeps of the block's state (the same attribute on both models).
_STATE = ("label", "value", "char_limit", "description", "read_only", "metadata_")
_NEW_BLOCK = ("id", *_STATE, "hidden", "tags", "version")
_BLOCK_COLUMNS = Block.__mapper__.columns  # by attribute name


async def write_changes(
    session: AsyncSession, block: Block, changes: Mapping[str, Any], *, change: str, actor: Actor, restored_version: int | None
) -> list[str]:
    """Store `changes` (by attribute) to the locked block with its next version, and the history row
    of its new state, in one direct statement (db/direct.py); the block object gets what was stored,
    as a flush would have given it. Returns the ids of the agents the block is attached to, read by
    the same statement (a round trip less for every edit): an attach waits for the block's lock, and
    an agent detached meanwhile is recompiled from its blocks as they are then, without this one. A
    relabel's clash with another block of an agent raises IntegrityError on
    uq_agent_block_agent_id_label, as a flush would."""
    version = block.version + 1
    state = {attribute: changes.get(attribute, getattr(block, attribute)) for attribute in _STATE}
    who = {**_by(actor), "change": change, "restored_version": restored_version}
    params = {**changes, **state, **who, "block_id": block.id, "version": version}
    written = (await direct.run(session, _writing(tuple(sorted(changes))), params)).one()
    updated_at, agent_ids = written.updated_at, written.agent_ids
    for attribute, value in {**changes, "version": version, "updated_at": updated_at}.items():
        set_committed_value(block, attribute, value)
    return list(agent_ids)


@cache  # one statement per set of changed attributes (a memory tool's edit: the value alone), built on first use
def _writing(changed: tuple[str, ...]) -> Direct:
    given = {attribute: bindparam(attribute, type_=_BLOCK_COLUMNS[attribute].type) for attribute in {*changed, *_STATE}}
    history = insert(_CHANGE_TABLE).values(
        {_CHANGE_COLUMNS[attribute].name: given[attribute] for attribute in _STATE}
        | {name: bindparam(name, type_=_CHANGE_COLUMNS[name].type) for name in (*_WHO, "change", "restored_version")}
        | {"organization_id": bindparam(ORGANIZATION), "block_id": bindparam("block_id"), "version": bindparam("version")}
        | {"id": _NEXT_CHANGE_ID}
    )
    blocks = _BLOCK_TABLE.c
    return Direct(
        update(_BLOCK_TABLE)
        .where(blocks.organization_id == bindparam(ORGANIZATION), blocks.id == bindparam("block_id"))
        .values({_BLOCK_COLUMNS[attribute].name: given[attribute] for attribute in changed})
        .values(version=bindparam("version", type_=Integer))
        .returning(blocks.updated_at, func.array(_ATTACHED_AGENTS.scalar_subquery()).label("agent_ids"))
        .add_cte(history.cte("history"))
    )


async def record_change(session: AsyncSession, block: Block, *, change: str, actor: Actor) -> None:
    """A history row of the locked block's state (its deletion's)."""
    state = {attribute: getattr(block, attribute) for attribute in _STATE}
    number = await session.scalar(
        select(_NEXT_CHANGE_ID), {ORGANIZATION: organization_of(session.sync_session), "block_id": block.id}
    )
    session.add(BlockChange(block_id=block.id, id=number, version=block.version, change=change, **_by(actor), **state))


_WHO = ("actor_type", "actor_id", "step_id", "run_id", "tool_call_id")


def _by(actor: Actor) -> dict[str, str | None]:
    """A history row's record of who made the change."""
    return dict(zip(_WHO, (actor.type, actor.id, actor.step_id, actor.run_id, actor.tool_call_id), strict=True))


async def insert_new(session: AsyncSession, blocks: Sequence[Block], *, actor: Actor) -> list[Block]:
    """Store validated new blocks and the history rows of their creation in one statement; the blocks
    as stored (with their timestamps), in the order given. The ORM would take a statement per table."""
    if not blocks:
        return []
    params = new_block_parameters(session, blocks, actor=actor, links=())
    by_id = {block.id: block for block in await session.scalars(_INSERT_BLOCKS, params)}
    return [by_id[block.id] for block in blocks]


def new_block_parameters(
    session: AsyncSession, blocks: Sequence[Block], *, actor: Actor, links: Sequence[tuple[str, str, str]]
) -> dict[str, Any]:
    """The parameters of the statements that store new blocks (`insert_new`, NEW_BLOCK_WRITES); `links`:
    (agent_id, block_id, label) of a new agent's attachments, in prompt order."""
    return {
        "organization_id": organization_of_new_rows(session.sync_session, "Block"),
        "blocks": [{c.name: getattr(block, a) for a, c in _NEW_BLOCK_COLUMNS.items()} for block in blocks],
        "links": [
            {"agent_id": agent, "block_id": block, "label": label, "n": n} for n, (agent, block, label) in enumerate(links)
        ],
        **_by(actor),
    }


# Built once, the rows going in as JSON parameters (json_rows): building a statement per call showed in the profile.
_NEW_BLOCK_COLUMNS = {attribute: Block.__mapper__.columns[attribute] for attribute in _NEW_BLOCK}
_ORGANIZATION = bindparam("organization_id", type_=String)
_LINKED = json_rows([column(name, String) for name in ("agent_id", "block_id", "label")] + [column("n", Integer)], "links")
_LINK_ROWS = insert(_LINK_TABLE).from_select(
    [_LINKS.organization_id, _LINKS.agent_id, _LINKS.block_id, _LINKS.label],
    select(_ORGANIZATION, _LINKED.c.agent_id, _LINKED.c.block_id, _LINKED.c.label).order_by(_LINKED.c.n),  # `position`'s order
)
_GIVEN = json_rows(_NEW_BLOCK_COLUMNS.values(), "blocks")
_STORED = (
    insert(Block)
    .from_select([Block.organization_id, *(getattr(Block, a) for a in _NEW_BLOCK)], select(_ORGANIZATION, *_GIVEN.c))
    .returning(*Block.__table__.c)
    .cte("new_block")
)
_NEW = aliased(Block, _STORED)
_HISTORY = insert(BlockChange).from_select(
    [getattr(BlockChange, c) for c in ("organization_id", "block_id", "id", "version", "change", *_WHO, *_STATE)],
    select(
        _NEW.organization_id,
        _NEW.id,
        literal(1),  # a new block's first change
        _NEW.version,
        literal("create"),
        *(bindparam(name, type_=String) for name in _WHO),
        *(getattr(_NEW, a) for a in _STATE),
    ),
)
_HISTORY_CTE = _HISTORY.cte("history")
_LINKS_CTE = _LINK_ROWS.cte("link")
_INSERT_BLOCKS = select(_NEW).add_cte(_HISTORY_CTE)
# The same writes, for a statement that stores more (a new agent's, agents/repository.py): the new
# blocks as stored (STORED_BLOCKS, its columns the table's), their history and the attachments.
STORED_BLOCKS = _STORED
NEW_BLOCK_WRITES = (_STORED, _HISTORY_CTE, _LINKS_CTE)


async def history_rows(
    session: AsyncSession, block_id: str, *, limit: int, before: int | None, since: int | None
) -> list[BlockChange]:
    """Up to `limit` changes newest first, versions below `before` and from `since` up (inclusive)."""
    query = select(BlockChange).where(BlockChange.block_id == block_id)
    if before is not None:
        query = query.where(BlockChange.version < before)
    if since is not None:
        query = query.where(BlockChange.version >= since)
    return list(await session.scalars(query.order_by(BlockChange.version.desc()).limit(limit)))


async def changes_after(session: AsyncSession, after: Mapping[str, int]) -> list[BlockChange]:
    """Each block's changes past the version given for it, oldest first (creation time, then id)."""
    if not after:
        return []
    past = [and_(BlockChange.block_id == block_id, BlockChange.version > version) for block_id, version in after.items()]
    query = select(BlockChange).where(or_(*past)).order_by(BlockChange.created_at, BlockChange.id)
    return list(await session.scalars(query))


async def change_at(session: AsyncSession, block_id: str, version: int) -> BlockChange | None:
    query = select(BlockChange).where(BlockChange.block_id == block_id, BlockChange.version == version)
    return await session.scalar(query.order_by(BlockChange.id.desc()).limit(1))


async def change_kinds(session: AsyncSession, block_id: str) -> list[tuple[int, str]]:
    """(version, change) of every kept change, oldest first: what undo and redo replay."""
    query = select(BlockChange.version, BlockChange.change).where(BlockChange.block_id == block_id)
    return [(version, change) for version, change in await session.execute(query.order_by(BlockChange.version))]


async def prune_history(session: AsyncSession, *, keep_versions: int | None, older_than: datetime | None) -> int:
    """Drop changes beyond the newest `keep_versions` of each block, and changes older than
    `older_than` except each live block's current version (a deleted block's history goes whole)."""
    pruned = 0
    # By each row's whole key, organization first: it runs across organizations, and the keys lead with it.
    key = (BlockChange.organization_id, BlockChange.block_id, BlockChange.id)
    if keep_versions is not None:
        of_block = (BlockChange.organization_id, BlockChange.block_id)
        rank = func.row_number().over(partition_by=of_block, order_by=BlockChange.version.desc()).label("rank")
        ranked = select(*key, rank).subquery()
        stale = select(ranked.c.organization_id, ranked.c.block_id, ranked.c.id).where(ranked.c.rank > keep_versions)
        pruned += await rows_affected(session, delete(BlockChange).where(tuple_(*key).in_(stale)))
    if older_than is not None:
        current = (
            select(Block.id)
            .where(
                Block.organization_id == BlockChange.organization_id,
                Block.id == BlockChange.block_id,
                Block.version == BlockChange.version,
            )
            .exists()
        )
        old = delete(BlockChange).where(BlockChange.created_at < older_than, ~current)
        pruned += await rows_affected(session, old)
    return pruned


async def tags(session: AsyncSession, page: NamePage) -> list[str]:
    return await fetch_names(session, Block.tags, page)
