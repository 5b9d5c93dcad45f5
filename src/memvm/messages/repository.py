"""All message and run SQL."""

import json
from collections.abc import Sequence
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    ClauseElement,
    ColumnElement,
    ColumnExpressionArgument,
    Row,
    Select,
    String,
    Text,
    bindparam,
    cast,
    func,
    insert,
    literal,
    null,
    select,
    text,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db import direct
from memvm.db.direct import ORGANIZATION, ByNull
from memvm.db.dml import rows_affected
from memvm.db.tenancy import organization_of
from memvm.orm import Message
from memvm.orm.conversation import in_conversation
from memvm.orm.message import EMBEDDING_QUEUE_PREDICATE, last_seq

_in_conversation = partial(in_conversation, Message.conversation_id)  # threads.py's names


async def in_context(session: AsyncSession, agent_id: str, conversation_id: str | None) -> list[Message]:
    """The conversation's context window in order: the running summary (if any) first, then by time."""
    return list(await session.scalars(_window(select(Message), agent_id, conversation_id)))


_Query = TypeVar("_Query", bound=Select[Any])


_MESSAGES = Message.__table__.c
_WINDOW_ORDER = (_MESSAGES.kind != "summary", _MESSAGES.seq)  # the running summary first, then by time


def _window(query: _Query, agent_id: str, conversation_id: str | None) -> _Query:
    """`query` over the conversation's context window, in its order."""
    in_window = query.where(Message.agent_id == agent_id, _in_conversation(conversation_id), Message.in_context)
    return in_window.order_by(*_WINDOW_ORDER)


# What the model reads of a message (runtime/loop/conversation.py): rows, not ORM objects, as a turn
# reads its whole window before each send and building hundreds of objects was most of that read;
# and a direct statement (db/direct.py), one form for the default conversation and one for the others.
_CHAT = (_MESSAGES.kind, _MESSAGES.role, _MESSAGES.content, _MESSAGES.tool_calls, _MESSAGES.tool_status, _MESSAGES.tool_call_id)

# A message as the model reads it, hashed (seeded with its seq): what a process that kept a window's
# messages checks them by (runtime/loop/kept_windows.py). Any change the model would see changes it; the
# embedding worker's and other bookkeeping writes do not.
_SEEN = func.hashtextextended(cast(tuple_(*_CHAT), Text), _MESSAGES.seq)


def _window_since(conversation: ColumnElement[Any]) -> ClauseElement:
    in_window = (
        _MESSAGES.organization_id == bindparam(ORGANIZATION),
        _MESSAGES.agent_id == bindparam("agent_id"),
        direct.equals(_MESSAGES.conversation_id, conversation),
        _MESSAGES.in_context,
    )
    known = bindparam("known_seq", type_=BigInteger)
    place = _WINDOW_ORDER[0].label("place")  # the window's own order; the check's NULL goes before it
    newer = select(_MESSAGES.seq, _SEEN.label("seen"), *_CHAT, null().label("kept"), null().label("kept_seen"), place)
    check = select(*(null() for _ in range(len(_CHAT) + 2)), func.count(), func.sum(_SEEN), null())
    newer, check = newer.where(*in_window, _MESSAGES.seq > known), check.where(*in_window, _MESSAGES.seq <= known)
    return union_all(newer, check).order_by(text("place NULLS FIRST"), text("seq"))


# One row that counts and sums what the window still holds of the messages up to `known_seq`, then
# the window's messages after it, in the window's order (the running summary first, then by time).
_CHAT_WINDOW_SINCE = ByNull("conversation_id", String(), _window_since)


async def chat_window_since(
    session: AsyncSession, agent_id: str, conversation_id: str | None, known_seq: int
) -> Sequence[Row[Any]]:
    """The window's messages after `known_seq` (each with its seq and `seen` hash), and one row whose
    `kept` and `kept_seen` are the count and the sum of `seen` of those up to it (the first row)."""
    params = {"agent_id": agent_id, "conversation_id": conversation_id, "known_seq": known_seq}
    return (await _CHAT_WINDOW_SINCE.run(session, params)).all()


async def all_of(session: AsyncSession, agent_id: str, conversation_id: str | None) -> list[Message]:
    query = select(Message).where(Message.agent_id == agent_id, _in_conversation(conversation_id)).order_by(Message.seq)
    return list(await session.scalars(query))


async def by_otid(session: AsyncSession, agent_id: str, otid: str) -> Message | None:
    return await session.scalar(select(Message).where(Message.agent_id == agent_id, Message.otid == otid))


async def of_run(session: AsyncSession, run_id: str) -> list[Message]:
    return list(await session.scalars(select(Message).where(Message.run_id == run_id).order_by(Message.seq)))


async def of_step(session: AsyncSession, step_id: str) -> list[Message]:
    return list(await session.scalars(select(Message).where(Message.step_id == step_id).order_by(Message.seq)))


async def _update_in_order(session: AsyncSession, where: Sequence[ColumnExpressionArgument[bool]], values: dict[str, Any]) -> int:
    """Update the messages matching `where`, locking them in the order of their ids first. Every
    statement that writes several messages at once does so (the embedding worker's store too,
    search/embedding_queue.py): two of them on the same rows, each locking in its own scan's order,
    could each hold a row the other waits for (a compaction's eviction against a store of the same
    messages' vectors did, and PostgreSQL ended the turn with "deadlock detected")."""
    lock = select(Message.id).where(*where).order_by(Message.id).with_for_update(key_share=True)
    locked = lock.cte("locked").prefix_with("MATERIALIZED")  # run once, in that order, whatever the update's plan
    statement = update(Message).where(Message.id == locked.c.id).values(**values)
    return await rows_affected(session, statement)


async def evict(session: AsyncSession, message_ids: Sequence[str]) -> None:
    await _update_in_order(session, [Message.id.in_(message_ids)], {"in_context": False})


async def evict_all(session: AsyncSession, agent_id: str, conversation_id: str | None) -> int:
    in_window = [Message.agent_id == agent_id, _in_conversation(conversation_id), Message.in_context]
    return await _update_in_order(session, in_window, {"in_context": False})


async def history_page(
    session: AsyncSession,
    agent_id: str,
    conversation_id: str | None,
    *,
    limit: int,
    newest_first: bool,
    before: Message | None,
    after: Message | None,
) -> list[Message]:
    """`before`/`after` bound the range in time; `newest_first` takes the page from the newest end.
    The page comes back in chronological order either way."""
    query = select(Message).where(Message.agent_id == agent_id, _in_conversation(conversation_id))
    if before is not None:
        query = query.where(Message.seq < before.seq)
    if after is not None:
        query = query.where(Message.seq > after.seq)
    query = query.order_by(Message.seq.desc() if newest_first else Message.seq.asc()).limit(limit)
    rows = list(await session.scalars(query))
    return rows[::-1] if newest_first else rows


# Across agents and conversations messages are listed by time, then seq (a conversation's own order),
# then id: ix_message_organization_id_created_at.
_LISTING_ORDER = (Message.created_at, Message.seq, Message.id)
_LISTED = tuple_(*_LISTING_ORDER)


def _listed(message: Message) -> ColumnElement[Any]:
    return tuple_(
        literal(message.created_at, Message.created_at.type), literal(message.seq, BigInteger), literal(message.id, String)
    )


async def organization_page(
    session: AsyncSession,
    *,
    conversation_id: str | None,
    limit: int,
    ascending: bool,
    before: Message | None,
    after: Message | None,
) -> list[Message]:
    """Messages of every agent in listing order (oldest or newest first); `before`/`after` are
    cursors in that order. With only `before`, the page nearest it."""
    query = select(Message)
    if conversation_id is not None:
        query = query.where(Message.conversation_id == conversation_id)
    if after is not None:
        query = query.where(_listed(after) < _LISTED if ascending else _listed(after) > _LISTED)
    if before is not None:
        query = query.where(_listed(before) > _LISTED if ascending else _listed(before) < _LISTED)
    backwards = before is not None and after is None
    query = query.order_by(*(c.asc() if ascending != backwards else c.desc() for c in _LISTING_ORDER)).limit(limit)
    rows = list(await session.scalars(query))
    return rows[::-1] if backwards else rows


_NO_VECTOR = {"embedding": None, "embedding_model": None, "embedding_dim": None, "embed_attempts": 0, "embed_claimed_at": None}


async def queue_reembedding(session: AsyncSession, agent_id: str) -> int:
    """Drop the agent's message vectors so the embedding queue recomputes them with its new model."""
    return await _update_in_order(session, [Message.agent_id == agent_id], _NO_VECTOR)


async def pending_embeddings(session: AsyncSession, agent_id: str) -> int:
    """How many of the agent's messages still wait for a vector (re-embedding progress)."""
    query = select(func.count()).where(Message.agent_id == agent_id, text(EMBEDDING_QUEUE_PREDICATE))
    return await session.scalar(query) or 0


async def insert_rows(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Append complete message rows (their keys the same) with COPY, stamped with the session's
    organization (COPY bypasses the flush that stamps ORM rows). For an imported history COPY is
    4x faster than a multi-row INSERT (10k messages: 1.4 s against 6.0 s, measured)."""
    organization_id = organization_of(session.sync_session)
    columns = list(rows[0])
    records = [(organization_id, *(_copy_value(row[column]) for column in columns)) for row in rows]
    asyncpg_connection = (await (await session.connection()).get_raw_connection()).driver_connection
    if asyncpg_connection is None:  # only a pool entry already given back has none
        raise RuntimeError("the session's connection was released during an import")
    await asyncpg_connection.copy_records_to_table("message", records=records, columns=["organization_id", *columns])


def _copy_value(value: Any) -> Any:
    """JSONB goes over the wire as JSON text (SQLAlchemy's asyncpg codec adds only the format byte)."""
    return json.dumps(value) if isinstance(value, list | dict) else value


_FORKED_COLUMNS = (
    "organization_id", "agent_id", "role", "kind", "content", "reasoning", "tool_calls", "tool_call_id", "tool_name",
    "tool_status", "tool_stdout", "tool_stderr", "sender_id", "in_context", "embedding", "embedding_model",
    "embedding_dim", "embed_attempts", "created_at",
)  # fmt: skip


async def copy_into(session: AsyncSession, agent_id: str, source: str | None, target: str, *, up_to: Message | None) -> int:
    """Copy the source conversation's messages (up to and including `up_to`) into `target`, with new
    ids, in order after target's own, window flags and vectors kept. Not their otids or runs: those
    stay the source's."""
    table = Message.__table__
    copied = [table.c[name] for name in _FORKED_COLUMNS]
    new_id = literal("message-") + cast(func.gen_random_uuid(), String)
    after = _last_seq_of(session, agent_id, target)
    seq = after + func.row_number().over(order_by=table.c.seq)
    rows = select(new_id, literal(target), seq, *copied).where(table.c.agent_id == agent_id, _in_conversation(source))
    if up_to is not None:
        rows = rows.where(table.c.seq <= up_to.seq)
    statement = insert(Message).from_select(["id", "conversation_id", "seq", *_FORKED_COLUMNS], rows.order_by(table.c.seq))
    return await rows_affected(session, statement)


async def next_seq(session: AsyncSession, agent_id: str, conversation_id: str | None) -> int:
    """The seq of a message stored next in the conversation; the caller holds its turn lock (or the
    conversation is not yet in use), so no other writer takes the same one."""
    return int(await session.scalar(select(_last_seq_of(session, agent_id, conversation_id))) or 0) + 1


def _last_seq_of(session: AsyncSession, agent_id: str, conversation_id: str | None) -> ColumnElement[int]:
    conversation = null() if conversation_id is None else literal(conversation_id, String)
    return last_seq(literal(organization_of(session.sync_session), String), literal(agent_id, String), conversation)
