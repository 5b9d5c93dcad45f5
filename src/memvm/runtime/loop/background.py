"""Background turns: the send returns its run at once and the turn runs in this process, storing
every event it streams (numbered) with the run. Any replica can then stream the run from a cursor:
what is stored first, then what comes, until the run ends. A run left `running` by a process that
died is failed by the next turn of its agent, or at start-up (runs.service.fail_orphans); one left
`created` (queued behind a busy agent) is failed at start-up when no live process holds its claim."""

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

import httpx

from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.conversations import service as conversations
from memvm.conversations.thread import ThreadRef
from memvm.db.engine import database_unreachable
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.errors import DomainError
from memvm.ids import new_id
from memvm.messages.letta_format import error_message
from memvm.messages.schemas import SendRequest
from memvm.orm import Run
from memvm.runs import service as runs
from memvm.runs.schemas import ACTIVE_STATUSES, RunRead, status_after
from memvm.runtime.loop.approvals import answers_to_pending
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.run_claims import run_claimed
from memvm.runtime.loop.run_end import when_reachable
from memvm.runtime.loop.send import send

log = logging.getLogger(__name__)
CALLBACK_ATTEMPTS = 3
CALLBACK_TIMEOUT_SECONDS = 5.0


async def start_background(deps: RuntimeDeps, caller: Caller, ref: ThreadRef, request: SendRequest) -> Run:
    """Queue the turn and return its run (`created`); the turn starts once it has the conversation's
    lock. A send that waiting tool calls refuse is refused here, before anything is queued. This
    process claims the run before storing it and holds the claim until the run has ended."""
    run_id = new_id("run")
    try:
        await deps.run_claims.claim(run_id)
        async with transaction(deps.sessionmaker, caller.organization_id) as session:
            thread = await conversations.open_thread(session, ref, for_write=True)
            answers_to_pending(thread, request)
            config, callback = request.run_config(), request.callback_url
            agent_id, conversation_id = thread.agent.id, thread.conversation_id
            run = await runs.queue_run(session, run_id, agent_id, conversation_id, request_config=config, callback_url=callback)
    except BaseException:
        await deps.run_claims.release(run_id)
        raise
    deps.in_background(_run(deps, caller, ref, request, run.id))
    return run


async def _run(deps: RuntimeDeps, caller: Caller, ref: ThreadRef, request: SendRequest, run_id: str) -> None:
    try:
        await _turn(deps, caller, ref, request, run_id)
    finally:
        await deps.run_claims.release(run_id)  # the run has ended (or this process is stopping)
    if request.callback_url:
        await _call_back(deps, caller, run_id, request.callback_url)


async def _turn(deps: RuntimeDeps, caller: Caller, ref: ThreadRef, request: SendRequest, run_id: str) -> None:
    seq, last_stop = 0, None
    try:
        async with aclosing(send(deps, caller, ref, request, run_id)) as events:
            async for event in events:
                if event.get("message_type") == "ping":
                    continue
                seq += 1
                last_stop = event.get("stop_reason", last_stop)
                async with transaction(deps.sessionmaker, caller.organization_id) as session:
                    runs.record_event(session, run_id, seq, {**event, "seq_id": seq})
    except DomainError as error:  # before the turn began: busy agent, pending approval, bad input
        await _end(deps, caller, run_id, seq, "error", error.message)
    except Exception as error:
        log.exception("background run %s failed", run_id)
        lost = database_unreachable(error)
        reason = "The run stopped: the database connection was lost." if lost else "The run failed with an internal error."
        await _end(deps, caller, run_id, seq, "error", reason)
    else:
        await _end(deps, caller, run_id, seq, last_stop or "end_turn", None)


async def _end(deps: RuntimeDeps, caller: Caller, run_id: str, seq: int, stop_reason: str, error: str | None) -> None:
    """_end_unstarted, retried while the database is unreachable: a run whose turn failed because the
    database went away (so the turn could not store its end either) ends once the database is back."""
    await when_reachable(run_id, lambda: _end_unstarted(deps, caller, run_id, seq, stop_reason, error))


async def _call_back(deps: RuntimeDeps, caller: Caller, run_id: str, url: str) -> None:
    """POST the finished run to the client's URL: a few tries with growing pauses, each bounded;
    how it went is kept on the run (callback_status_code / callback_error)."""
    status, error = None, None
    for attempt in range(CALLBACK_ATTEMPTS):
        async with transaction(deps.sessionmaker, caller.organization_id) as session:
            body = RunRead.of(await runs.get_run(session, run_id)).model_dump(mode="json")
        try:
            async with httpx.AsyncClient(timeout=CALLBACK_TIMEOUT_SECONDS) as http:
                status = (await http.post(url, json=body)).status_code
            error = None if status < 400 else f"HTTP {status}"
        except httpx.HTTPError as failure:
            status, error = None, f"{type(failure).__name__}: {failure}"
        if error is None or (status is not None and status < 500 and status != 429):
            break
        await asyncio.sleep(0.5 * 2**attempt)
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        run = await runs.get_run(session, run_id)
        run.callback_sent_at, run.callback_status_code, run.callback_error = datetime.now(UTC), status, error


async def _end_unstarted(deps: RuntimeDeps, caller: Caller, run_id: str, seq: int, stop_reason: str, error: str | None) -> None:
    """A run whose turn never began (refused, or answered from a stored otid) is finished here;
    one whose turn ran was finished by the turn."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        run = await runs.get_run(session, run_id)
        if run.status not in ACTIVE_STATUSES:
            return
        run.status, run.stop_reason, run.completed_at = status_after(stop_reason), stop_reason, datetime.now(UTC)
        if error is not None:
            failure = error_message(run_id, stop_reason, error)
            runs.record_event(session, run_id, seq + 1, {**failure, "seq_id": seq + 1})
            runs.record_event(
                session, run_id, seq + 2, {"message_type": "stop_reason", "stop_reason": stop_reason, "seq_id": seq + 2}
            )


async def follow(
    deps: RuntimeDeps, caller: Caller, run_id: str, *, starting_after: int, poll_seconds: float, batch: int
) -> AsyncGenerator[dict[str, Any], None]:
    """The run's events after the cursor: stored ones at once, then new ones as they are stored,
    until the run has ended and all are sent."""
    cursor, settled = starting_after, False
    while True:
        async with transaction(deps.sessionmaker, caller.organization_id) as session:
            run = await runs.get_run(session, run_id)
            status, background = run.status, run.background
            events = await runs.events_after(session, run_id, cursor, batch)
        for event in events:
            cursor = event.seq
            yield event.payload
        if not events and status not in ACTIVE_STATUSES:
            if settled or not background:
                return
            # A background turn stores its end with its last step, and its last events just after.
            # Once its process has let go of the run's claim they are all stored: one more read,
            # begun after that check, sees them.
            settled = not await run_claimed(deps.lock_engine, run_id)
            if settled:
                continue
        if len(events) < batch:
            await asyncio.sleep(poll_seconds)


async def cancel_runs(deps: RuntimeDeps, caller: Caller, agent_id: str, run_ids: Sequence[str] | None) -> list[str]:
    """Flag the active runs of every conversation of the agent (or those of `run_ids`) to stop at
    their next safe point; this replica's stop at once, the others' when the NOTIFY arrives. The
    runs asked to stop."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        await agents.get_agent(session, agent_id)
        asked = await runs.request_cancel(session, agent_id, run_ids)
    return _signal(deps, asked)


async def cancel_conversation_runs(deps: RuntimeDeps, caller: Caller, ref: ThreadRef) -> list[str]:
    """As cancel_runs, for the active runs of one conversation."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        thread = await conversations.open_thread(session, ref)
        asked = await runs.request_cancel(session, thread.agent.id, None, conversation_id=thread.conversation_id)
    return _signal(deps, asked)


def _signal(deps: RuntimeDeps, run_ids: list[str]) -> list[str]:
    for run_id in run_ids:
        deps.cancels.signal(run_id)
    return run_ids


async def fail_orphaned_runs(deps: RuntimeDeps) -> int:
    """At start-up: runs left `running` whose agent's turn lock is free were run by a process that
    is gone, and so were runs left `created` whose claim is free; fail them so clients polling them
    get an answer."""
    async with transaction(deps.sessionmaker, ALL_ORGANIZATIONS) as session:
        running = [(run.organization_id, run.agent_id, run.conversation_id) for run in await runs.running_runs(session)]
        queued = [(run.organization_id, run.id) for run in await runs.queued_runs(session)]
    failed = 0
    for organization_id, run_id in queued:
        if not await run_claimed(deps.lock_engine, run_id):
            async with transaction(deps.sessionmaker, organization_id) as session:
                failed += await runs.fail_queued(session, run_id)
    for organization_id, agent_id, conversation_id in dict.fromkeys(running):
        try:
            async with (
                deps.turn_lock(organization_id, conversation_id or agent_id, timeout_seconds=0.001),
                transaction(deps.sessionmaker, organization_id) as session,
            ):
                failed += len(await runs.fail_orphans(session, agent_id, conversation_id))
        except DomainError:  # the lock is held: a live process runs that agent's turn
            continue
    return failed
