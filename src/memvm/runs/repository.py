"""All run and step SQL."""

from collections.abc import Sequence
from functools import partial
from typing import Any

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Insert,
    Integer,
    Select,
    String,
    Update,
    any_,
    bindparam,
    column,
    func,
    insert,
    literal_column,
    null,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from memvm.db import direct
from memvm.db.base import Base
from memvm.db.direct import ORGANIZATION, ByNull, Direct
from memvm.db.dml import json_rows, row_of
from memvm.db.tenancy import organization_of_new_rows
from memvm.orm import Message, Run, RunEvent, Step
from memvm.orm.conversation import in_conversation
from memvm.orm.message import last_seq
from memvm.runs.schemas import LastRun

_in_conversation = partial(in_conversation, Run.conversation_id)  # threads.py's names


def runs_query(
    *,
    agent_ids: Sequence[str],
    statuses: Sequence[str],
    background: bool | None,
    stop_reason: str | None,
    conversation_id: str | None,
) -> Select[Run]:
    query = select(Run)
    if conversation_id is not None:
        query = query.where(Run.conversation_id == conversation_id)
    if agent_ids:
        query = query.where(Run.agent_id.in_(agent_ids))
    if statuses:
        query = query.where(Run.status.in_(statuses))
    if background is not None:
        query = query.where(Run.background.is_(background))
    if stop_reason is not None:
        query = query.where(Run.stop_reason == stop_reason)
    return query


def steps_query(*, agent_id: str | None, run_id: str | None, model: str | None) -> Select[Step]:
    query = select(Step)
    if agent_id is not None:
        query = query.where(Step.agent_id == agent_id)
    if run_id is not None:
        query = query.where(Step.run_id == run_id)
    if model is not None:
        query = query.where((Step.model == model) | (func.split_part(Step.model, "/", 2) == model))
    return query


_RUN_TABLE = Base.metadata.tables[Run.__tablename__]  # Core: direct statements
_RUNS = _RUN_TABLE.c
_LATEST_RUNS = Direct(  # read on every agent view: a direct statement (db/direct.py)
    select(_RUNS.agent_id, _RUNS.status, _RUNS.stop_reason, _RUNS.completed_at)
    .where(_RUNS.organization_id == bindparam(ORGANIZATION), _RUNS.agent_id == any_(bindparam("agent_ids", type_=ARRAY(String))))
    .where(_RUNS.completed_at.is_not(None))
    .ext(distinct_on(_RUNS.agent_id))
    .order_by(_RUNS.agent_id, _RUNS.created_at.desc())
)


async def latest_runs(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, LastRun]:
    """How each agent's newest finished run ended."""
    rows = await direct.run(session, _LATEST_RUNS, {"agent_ids": list(agent_ids)})
    return {row.agent_id: LastRun(row.status, row.stop_reason, row.completed_at) for row in rows}


async def runs_by_ids(session: AsyncSession, run_ids: Sequence[str]) -> dict[str, Run]:
    return {run.id: run for run in await session.scalars(select(Run).where(Run.id.in_(run_ids)))}


_LATEST_PROMPT_TOKENS = (  # the console's agent list: how full each window was at its last model call
    select(Step.agent_id, Step.prompt_tokens)
    .where(Step.agent_id.in_(bindparam("agent_ids", expanding=True)), Step.status == "success")
    .ext(distinct_on(Step.agent_id))
    .order_by(Step.agent_id, Step.created_at.desc())
)


async def latest_prompt_tokens(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, int]:
    """Each agent's prompt tokens at its newest successful step."""
    rows = await session.execute(_LATEST_PROMPT_TOKENS, {"agent_ids": list(agent_ids)})
    return {agent_id: tokens for agent_id, tokens in rows}


CANCEL_CHANNEL = "memvm_run_cancel"


async def request_cancel(
    session: AsyncSession, agent_id: str, conversation_id: str | None, run_ids: Sequence[str] | None
) -> list[str]:
    """Flag the conversation's active runs (or those of `run_ids`) and tell every replica, at commit."""
    query = (
        update(Run)
        .where(
            Run.agent_id == agent_id,
            _in_conversation(conversation_id),
            Run.status.in_(("created", "running")),
        )
        .values(cancel_requested_at=func.now())
        .returning(Run.id)
    )
    if run_ids is not None:
        query = query.where(Run.id.in_(run_ids))
    cancelled = list(await session.scalars(query))
    for run_id in cancelled:
        await session.execute(text("SELECT pg_notify(:channel, :run_id)"), {"channel": CANCEL_CHANNEL, "run_id": run_id})
    return cancelled


async def cancel_requested(session: AsyncSession, run_id: str) -> bool:
    return bool(await session.scalar(select(Run.cancel_requested_at.is_not(None)).where(Run.id == run_id)))


async def events_after(session: AsyncSession, run_id: str, after: int, limit: int) -> list[RunEvent]:
    query = select(RunEvent).where(RunEvent.run_id == run_id, RunEvent.seq > after).order_by(RunEvent.seq).limit(limit)
    return list(await session.scalars(query))


# Constants, not parameters: in a statement that also sets a run's status they would share its parameter's name.
_FAILED = {"status": literal_column("'failed'"), "stop_reason": literal_column("'error'"), "completed_at": func.now()}
_by_conversation = partial(ByNull, "conversation_id", String())  # a statement's two forms: default or given conversation


def _orphans(conversation: ColumnElement[Any]) -> Update:
    """Fail the conversation's `running` runs (the caller knows no process runs them)."""
    return (
        update(_RUN_TABLE)
        .where(_RUNS.organization_id == bindparam(ORGANIZATION), _RUNS.agent_id == bindparam("agent_id"))
        .where(direct.equals(_RUNS.conversation_id, conversation), _RUNS.status == "running")
        .values(_FAILED)
        .returning(_RUNS.id)
    )


_FAIL_RUNNING = _by_conversation(_orphans)


async def fail_running(session: AsyncSession, agent_id: str, conversation_id: str | None) -> list[str]:
    failed = await _FAIL_RUNNING.run(session, {"agent_id": agent_id, "conversation_id": conversation_id})
    return list(failed.scalars())


_NEW_RUN = ("id", "agent_id", "conversation_id", "status", "request_config")  # what insert_running stores; defaults the rest
_INSERT_RUNNING = _by_conversation(  # a new run, and the same conversation's orphans failed
    lambda conversation: (
        insert(_RUN_TABLE)
        .values({name: bindparam(name, type_=_RUNS[name].type) for name in _NEW_RUN if name != "conversation_id"})
        .values(organization_id=bindparam(ORGANIZATION), conversation_id=conversation)
        .returning(*_RUNS)
        .add_cte(_orphans(conversation).cte("orphans"))
    )
)
_RESUME_QUEUED = _by_conversation(  # the queued run `running`, and the same conversation's orphans failed
    lambda conversation: (
        update(_RUN_TABLE)
        .where(_RUNS.organization_id == bindparam(ORGANIZATION), _RUNS.id == bindparam("run_id"))
        .values(status=literal_column("'running'"))
        .returning(*_RUNS)
        .add_cte(_orphans(conversation).cte("orphans"))
    )
)


async def insert_running(session: AsyncSession, run: Run) -> Run:
    """Store the new `running` run, failing the conversation's orphaned `running` runs in the same
    statement; the run as stored (not added to the session: what it holds is what was stored)."""
    [stored] = await _INSERT_RUNNING.run(session, {name: getattr(run, name) for name in _NEW_RUN})
    return _as_stored(run, stored)


async def resume_queued(session: AsyncSession, run_id: str, agent_id: str, conversation_id: str | None) -> Run | None:
    """Mark the queued run `running`, failing the conversation's orphaned `running` runs in the same
    statement; the run as stored (not in the session), None if there is no such run."""
    params = {"run_id": run_id, "agent_id": agent_id, "conversation_id": conversation_id}
    stored = (await _RESUME_QUEUED.run(session, params)).first()
    return None if stored is None else _as_stored(Run(), stored)


def _as_stored(run: Run, row: Any) -> Run:
    for name, value in row._asdict().items():
        set_committed_value(run, name, value)
    return run


_FINISHED = ("status", "stop_reason", "usage", "completed_at", "ttft_ns", "total_duration_ns")  # what finish() sets
_FINISH = Direct(
    update(_RUN_TABLE)
    .where(_RUNS.organization_id == bindparam(ORGANIZATION), _RUNS.id == bindparam("run_id"))
    .values({name: bindparam(name, type_=_RUNS[name].type) for name in _FINISHED})
)


async def finish(session: AsyncSession, run_id: str, values: dict[str, Any]) -> None:
    """One UPDATE, no read first, of the _FINISHED columns (a direct statement: db/direct.py)."""
    await direct.run(session, _FINISH, {"run_id": run_id, **values})


async def fail_if(session: AsyncSession, run_id: str, status: str) -> bool:
    """Mark the run failed if it is still `status` (the caller knows no process will go on with it)."""
    query = update(Run).where(Run.id == run_id, Run.status == status).values(_FAILED).returning(Run.id)
    return (await session.scalar(query)) is not None


async def running_runs(session: AsyncSession) -> list[Run]:
    return list(await session.scalars(select(Run).where(Run.status == "running")))


async def queued_runs(session: AsyncSession) -> list[Run]:
    return list(await session.scalars(select(Run).where(Run.status == "created")))


async def newest_run(
    session: AsyncSession, agent_id: str, conversation_id: str | None, *, otid: str | None, active_only: bool
) -> Run | None:
    """The conversation's newest run: the newest active one, or the one whose request carried `otid`."""
    query = select(Run).where(Run.agent_id == agent_id, _in_conversation(conversation_id))
    if otid is not None:
        query = query.where(Run.request_config["otids"].contains([otid]))
    if active_only:
        query = query.where(Run.status.in_(("created", "running")))
    return await session.scalar(query.order_by(Run.created_at.desc()).limit(1))


# A step's row and the messages it stores go in one statement, built once, the rows as JSON parameters
# (json_rows). What the database fills in is the organization, the messages' seq (after the
# conversation's last: one statement form per kind of conversation, ByNull's) and the timestamps.
_FILLED_IN = {"organization_id", "seq", "fts", "embedding", "tags", "created_at"}
_STEP_TABLE, _MESSAGE_TABLE = (Base.metadata.tables[model.__tablename__] for model in (Step, Message))  # Core: one statement
_STEP_COLUMNS = [c for c in _STEP_TABLE.c if c.name not in _FILLED_IN]
_MESSAGE_COLUMNS = [c for c in _MESSAGE_TABLE.c if c.name not in _FILLED_IN]
_ORGANIZATION = bindparam("organization_id", type_=String)
_GIVEN_STEP = json_rows(_STEP_COLUMNS, "step")
_GIVEN_MESSAGES = json_rows([*_MESSAGE_COLUMNS, column("n", Integer)], "messages")
_NEW_STEP = insert(_STEP_TABLE).from_select(
    ["organization_id", *(c.name for c in _STEP_COLUMNS)], select(_ORGANIZATION, *_GIVEN_STEP.c)
)


def _insert_messages(conversation_id: ColumnElement[Any]) -> Insert:
    after = last_seq(_ORGANIZATION, bindparam("agent_id", type_=String), conversation_id)
    given = [_GIVEN_MESSAGES.c[c.name] for c in _MESSAGE_COLUMNS]
    rows = select(_ORGANIZATION, after + _GIVEN_MESSAGES.c.n + 1, *given).order_by(_GIVEN_MESSAGES.c.n)  # seq order
    return (
        insert(_MESSAGE_TABLE)
        .from_select(["organization_id", "seq", *(c.name for c in _MESSAGE_COLUMNS)], rows)
        .returning(*(_MESSAGE_TABLE.c[name] for name in ("id", "organization_id", "seq", "created_at")))
    )


# By whether the messages are in the agent's default conversation (conversation_id NULL).
_INSERT_MESSAGES = {
    default: _insert_messages(null() if default else bindparam("conversation_id", type_=String)) for default in (True, False)
}
_INSERT_STEP_AND_MESSAGES = {
    default: statement.add_cte(_NEW_STEP.cte("new_step")) for default, statement in _INSERT_MESSAGES.items()
}


async def insert_messages(session: AsyncSession, messages: Sequence[Message]) -> None:
    """Store the messages (in the order given, all of one conversation) in one statement, the step's
    row not yet; their objects get what the database filled in, as a flush would have given them."""
    await _insert(session, _INSERT_MESSAGES, {}, messages)


async def insert_step(session: AsyncSession, step: Step, messages: Sequence[Message]) -> None:
    """Store the step's row and its messages (in the order given) in one statement, as insert_messages."""
    await _insert(session, _INSERT_STEP_AND_MESSAGES, {"step": [row_of(step, _STEP_COLUMNS)]}, messages)


async def _insert(
    session: AsyncSession, statements: dict[bool, Insert], params: dict[str, Any], messages: Sequence[Message]
) -> None:
    given = [row_of(message, _MESSAGE_COLUMNS) for message in messages]
    rows = [row | {"n": n} for n, row in enumerate(given)]
    organization_id = organization_of_new_rows(session.sync_session, "Message")
    threads = {(row["agent_id"], row["conversation_id"]) for row in given}
    if len(threads) > 1:
        raise ValueError(f"messages are stored one conversation at a time, not {sorted(threads, key=str)}")
    agent_id, conversation_id = next(iter(threads), (None, None))
    params = params | {"organization_id": organization_id, "messages": rows, "agent_id": agent_id}
    if conversation_id is not None:
        params["conversation_id"] = conversation_id
    result = await session.execute(statements[conversation_id is None], params)
    filled_in = {row.id: row._asdict() for row in result}
    for message, row in zip(messages, given, strict=True):
        for name, value in (row | filled_in[message.id]).items():
            set_committed_value(message, name, value)
