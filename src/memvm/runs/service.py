"""Runs and steps: written by the turn, read by clients. Callers hold the transaction."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.pagination import PageRequest, fetch_page
from memvm.db.tenancy import owned
from memvm.errors import NotFound
from memvm.ids import new_id
from memvm.orm import Message, Run, RunEvent, Step
from memvm.runs import repository, traces
from memvm.runs.clock import RunClock
from memvm.runs.schemas import ACTIVE_STATUSES, ALL_STATUSES, LastRun, RunUsage, StepFeedback, status_after
from memvm.threads import ANY_CONVERSATION, describe


@dataclass(frozen=True)
class RunFilter:
    agent_ids: Sequence[str] = ()
    statuses: Sequence[str] = ()
    active: bool | None = None  # True: created or running; False: finished
    background: bool | None = None
    stop_reason: str | None = None
    conversation_id: str | None = None


async def start_run(
    session: AsyncSession,
    agent_id: str,
    conversation_id: str | None,
    *,
    request_config: dict[str, Any],
    run_id: str | None = None,
) -> Run:
    """The running turn's run: a new one, or the background run created when it was queued. The
    conversation's runs left `running` fail in the same statement (fail_orphans): call it holding the
    conversation's turn lock."""
    if run_id is not None:
        resumed = await repository.resume_queued(session, run_id, agent_id, conversation_id)
        if resumed is None:
            raise NotFound(f"Run {run_id!r} not found.")
        return resumed
    run = Run(id=new_id("run"), agent_id=agent_id, conversation_id=conversation_id, status="running")
    run.request_config = request_config
    return await repository.insert_running(session, run)


async def queue_run(
    session: AsyncSession,
    run_id: str,
    agent_id: str,
    conversation_id: str | None,
    *,
    request_config: dict[str, Any],
    callback_url: str | None = None,
) -> Run:
    """A background run, `created` until its turn starts."""
    run = Run(
        id=run_id,
        agent_id=agent_id,
        conversation_id=conversation_id,
        status="created",
        request_config=request_config,
        background=True,
        callback_url=callback_url,
    )
    session.add(run)
    await session.flush()
    await session.refresh(run)
    return run


async def fail_orphans(session: AsyncSession, agent_id: str, conversation_id: str | None) -> list[str]:
    """Runs of the conversation marked running whose process is gone. Call it holding the
    conversation's turn lock: a live turn holds that lock, so none of its runs can still be running."""
    return await repository.fail_running(session, agent_id, conversation_id)


async def running_runs(session: AsyncSession) -> list[Run]:
    return await repository.running_runs(session)


async def queued_runs(session: AsyncSession) -> list[Run]:
    return await repository.queued_runs(session)


async def fail_queued(session: AsyncSession, run_id: str) -> bool:
    """A background run that never started and never will: the process that queued it is gone."""
    return await repository.fail_if(session, run_id, "created")


async def fail_cut_off(session: AsyncSession, run_id: str) -> bool:
    """A run whose turn stopped without storing its end (the database went away), unless the end
    was stored after all (a commit whose acknowledgement was lost)."""
    return await repository.fail_if(session, run_id, "running")


def record_event(session: AsyncSession, run_id: str, seq: int, payload: dict[str, Any]) -> None:
    session.add(RunEvent(run_id=run_id, seq=seq, payload=payload))


async def events_after(session: AsyncSession, run_id: str, after: int, limit: int) -> list[RunEvent]:
    return await repository.events_after(session, run_id, after, limit)


async def finish_run(session: AsyncSession, run_id: str, *, stop_reason: str, usage: dict[str, Any], clock: RunClock) -> None:
    values = {
        "status": status_after(stop_reason),
        "stop_reason": stop_reason,
        "usage": usage,
        "completed_at": datetime.now(UTC),
        "ttft_ns": clock.ttft_ns(),
        "total_duration_ns": clock.duration_ns(),
    }
    await repository.finish(session, run_id, values)


def record_step(session: AsyncSession, step: Step) -> None:
    session.add(step)


async def store_messages(session: AsyncSession, messages: Sequence[Message]) -> None:
    """What a step said, stored before its tool calls run (they may read the conversation), in one
    statement; store_step stores the rest with the step's row."""
    await repository.insert_messages(session, messages)


async def store_step(session: AsyncSession, step: Step, messages: Sequence[Message]) -> None:
    """The step's row and the messages it stores, in one statement."""
    await repository.insert_step(session, step, messages)


async def get_run(session: AsyncSession, run_id: str) -> Run:
    run = await owned(session, Run, run_id)
    if run is None:
        raise NotFound(f"Run {run_id!r} not found.")
    return run


async def list_runs(session: AsyncSession, page: PageRequest, run_filter: RunFilter) -> list[Run]:
    statuses = set(run_filter.statuses or ALL_STATUSES)
    if run_filter.active is not None:  # `active` narrows `statuses`; both given and disjoint: nothing
        statuses = statuses & ACTIVE_STATUSES if run_filter.active else statuses - ACTIVE_STATUSES
    query = repository.runs_query(
        agent_ids=run_filter.agent_ids,
        statuses=sorted(statuses) if statuses != ALL_STATUSES else [],
        background=run_filter.background,
        stop_reason=run_filter.stop_reason,
        conversation_id=run_filter.conversation_id,
    )
    if not statuses:
        return []
    return await fetch_page(session, query, Run, page)


async def delete_run(session: AsyncSession, run_id: str) -> None:
    """The run and its steps; the messages it stored stay in the conversation."""
    await session.delete(await get_run(session, run_id))


def usage_of(run: Run) -> RunUsage:
    usage = run.usage or {}
    return RunUsage(
        prompt_tokens=usage.get("prompt_tokens", 0),
        completion_tokens=usage.get("completion_tokens", 0),
        total_tokens=usage.get("total_tokens", 0),
    )


async def get_step(session: AsyncSession, step_id: str) -> Step:
    step = await owned(session, Step, step_id)
    if step is None:
        raise NotFound(f"Step {step_id!r} not found.")
    return step


async def set_feedback(session: AsyncSession, step_id: str, feedback: StepFeedback) -> Step:
    """A client's rating of a step: the feedback replaces the step's, and tags, when given, its tags."""
    step = await get_step(session, step_id)
    step.feedback = feedback.feedback
    if feedback.tags:
        step.tags = feedback.tags
    await session.flush()
    await session.refresh(step)
    return step


async def run_trace(session: AsyncSession, run_id: str, limit: int) -> list[dict[str, Any]]:
    run = await get_run(session, run_id)
    steps_of_run = repository.steps_query(agent_id=None, run_id=run_id, model=None)
    steps = await fetch_page(session, steps_of_run, Step, PageRequest(limit, "asc"))
    return traces.run_trace(run, steps, limit)


async def list_steps(
    session: AsyncSession, page: PageRequest, *, agent_id: str | None = None, run_id: str | None = None, model: str | None = None
) -> list[Step]:
    return await fetch_page(session, repository.steps_query(agent_id=agent_id, run_id=run_id, model=model), Step, page)


async def latest_runs(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, LastRun]:
    return await repository.latest_runs(session, agent_ids) if agent_ids else {}


async def runs_by_ids(session: AsyncSession, run_ids: Sequence[str]) -> dict[str, Run]:
    return await repository.runs_by_ids(session, run_ids) if run_ids else {}


async def latest_prompt_tokens(session: AsyncSession, agent_ids: Sequence[str]) -> dict[str, int]:
    return await repository.latest_prompt_tokens(session, agent_ids) if agent_ids else {}


CANCEL_CHANNEL = repository.CANCEL_CHANNEL


async def request_cancel(
    session: AsyncSession, agent_id: str, run_ids: Sequence[str] | None, *, conversation_id: str | None = ANY_CONVERSATION
) -> list[str]:
    """Ask the active runs of a conversation (by default of every conversation of the agent) to
    stop, on whichever replica runs them; the ids asked."""
    return await repository.request_cancel(session, agent_id, conversation_id, run_ids)


async def run_to_follow(session: AsyncSession, agent_id: str, conversation_id: str | None, *, otid: str | None) -> Run:
    """The run a client resumes: the one whose send carried `otid`, else the newest active run."""
    run = await repository.newest_run(session, agent_id, conversation_id, otid=otid, active_only=otid is None)
    if run is None:
        what = f"whose send carried otid {otid!r}" if otid else "active"
        raise NotFound(f"There is no run {what} in {describe(agent_id, conversation_id)}.")
    return run


async def cancel_requested(session: AsyncSession, run_id: str) -> bool:
    return await repository.cancel_requested(session, run_id)
