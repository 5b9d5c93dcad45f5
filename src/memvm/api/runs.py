"""Runs (one per turn) and their steps (one per model call), as letta-client's `runs` and `steps`
resources read them. Every route sees only the caller's organization."""

from typing import Annotated, Any

from fastapi import Depends, Path, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from memvm.agents import letta_messages
from memvm.api.auth import CallerDep
from memvm.api.deps import ReadDep, RuntimeDep, TransactionDep, page_params
from memvm.api.routers import api_router
from memvm.api.schemas import NULL_ANSWER, LettaMessage
from memvm.api.sse import EVENT_STREAM, sse
from memvm.db.pagination import PageRequest
from memvm.ids import id_pattern
from memvm.runs import service as runs
from memvm.runs.schemas import RunRead, RunUsage, StepFeedback, StepMetrics, StepRead
from memvm.runs.service import RunFilter
from memvm.runtime.loop.background import follow

router = api_router(tags=["runs"])
RunId = Annotated[str, Path(pattern=id_pattern("run"), description="run-<uuid4>")]
StepId = Annotated[str, Path(pattern=id_pattern("step"), description="step-<uuid4>")]
Page = Annotated[PageRequest, Depends(page_params(50, "desc"))]
AscendingPage = Annotated[PageRequest, Depends(page_params(100, "asc"))]


async def _run_filter(
    agent_id: str | None = None,
    agent_ids: Annotated[list[str] | None, Query()] = None,
    statuses: Annotated[list[str] | None, Query(description="created, running, completed, failed, cancelled")] = None,
    active: bool | None = Query(None, description="Only runs still going (true) or only finished ones (false)."),
    background: bool | None = None,
    stop_reason: str | None = None,
    conversation_id: str | None = Query(None, description="Only runs of this conversation (conv-…)."),
) -> RunFilter:
    return RunFilter(
        agent_ids=[*(agent_ids or ()), *([agent_id] if agent_id else [])],
        statuses=statuses or (),
        active=active,
        background=background,
        stop_reason=stop_reason,
        conversation_id=conversation_id,
    )


@router.get("/v1/runs/", response_model=list[RunRead])
async def list_runs(read: ReadDep, page: Page, run_filter: Annotated[RunFilter, Depends(_run_filter)]) -> list[RunRead]:
    """Your organization's runs, newest first by default."""
    async with read() as session:
        return [RunRead.of(run) for run in await runs.list_runs(session, page, run_filter)]


@router.get("/v1/runs/{run_id}", response_model=RunRead)
async def retrieve_run(run_id: RunId, read: ReadDep) -> RunRead:
    """One run: status, stop reason, timings and the request's options."""
    async with read() as session:
        return RunRead.of(await runs.get_run(session, run_id))


@router.delete("/v1/runs/{run_id}", status_code=204)
async def delete_run(run_id: RunId, tx: TransactionDep) -> Response:
    """Delete the run and its steps; the messages it stored stay in the conversation."""
    async with tx() as session:
        await runs.delete_run(session, run_id)
    return Response(status_code=204)


@router.get("/v1/runs/{run_id}/usage", response_model=RunUsage)
async def run_usage(run_id: RunId, read: ReadDep) -> RunUsage:
    """The run's tokens, summed over its model calls."""
    async with read() as session:
        return runs.usage_of(await runs.get_run(session, run_id))


@router.get("/v1/runs/{run_id}/messages", response_model=list[LettaMessage])
async def run_messages(run_id: RunId, read: ReadDep, page: AscendingPage) -> list[dict[str, Any]]:
    """What the run stored, as Letta messages, oldest first by default."""
    async with read() as session:
        return await letta_messages.of_run(session, run_id, page)


@router.get("/v1/runs/{run_id}/trace", response_model=list[dict[str, Any]])
async def run_trace(
    run_id: RunId, read: ReadDep, limit: int = Query(1000, ge=1, le=5000, description="Maximum number of spans to return.")
) -> list[dict[str, Any]]:
    """The run's spans, built from what memvm records: the run (start, duration, status, tokens), its
    time to first token, and each step with its model call (time, model, tokens); a step's tool calls
    and error are attributes of its span (memvm does not time them apart)."""
    async with read() as session:
        return await runs.run_trace(session, run_id, limit)


@router.get("/v1/runs/{run_id}/steps", response_model=list[StepRead])
async def run_steps(run_id: RunId, read: ReadDep, page: AscendingPage) -> list[StepRead]:
    """The run's model calls, oldest first by default."""
    async with read() as session:
        await runs.get_run(session, run_id)
        return [StepRead.of(step) for step in await runs.list_steps(session, page, run_id=run_id)]


@router.get("/v1/steps/", response_model=list[StepRead])
async def list_steps(read: ReadDep, page: Page, agent_id: str | None = None, model: str | None = None) -> list[StepRead]:
    """Your organization's steps, newest first by default; `model` matches the handle or its name."""
    async with read() as session:
        return [StepRead.of(step) for step in await runs.list_steps(session, page, agent_id=agent_id, model=model)]


@router.get("/v1/steps/{step_id}", response_model=StepRead)
async def retrieve_step(step_id: StepId, read: ReadDep) -> StepRead:
    """One model call: model, tokens, latencies, tool calls, error if any."""
    async with read() as session:
        return StepRead.of(await runs.get_step(session, step_id))


@router.get("/v1/steps/{step_id}/messages", response_model=list[LettaMessage])
async def step_messages(step_id: StepId, read: ReadDep, page: AscendingPage) -> list[dict[str, Any]]:
    """What the step stored, as Letta messages."""
    async with read() as session:
        return await letta_messages.of_step(session, step_id, page)


@router.get("/v1/steps/{step_id}/metrics", response_model=StepMetrics, response_model_exclude_none=True)
async def step_metrics(step_id: StepId, read: ReadDep) -> StepMetrics:
    """The step's model-call time and its time from the model call's start to its end (tool calls
    and storing are not timed apart)."""
    async with read() as session:
        return StepMetrics.of(await runs.get_step(session, step_id))


@router.get("/v1/steps/{step_id}/trace", response_model=None, responses=NULL_ANSWER)
async def step_trace(step_id: StepId, read: ReadDep) -> None:
    """The provider's request and response for the step: memvm does not keep them, so the answer is
    null (as Letta's when it does not track them); GET /v1/runs/{id}/trace has the step's timings."""
    async with read() as session:
        await runs.get_step(session, step_id)


@router.patch("/v1/steps/{step_id}/feedback", response_model=StepRead)
async def step_feedback(step_id: StepId, body: StepFeedback, tx: TransactionDep) -> StepRead:
    """Rate a step: `feedback` (positive, negative or null) replaces its rating; `tags`, when given, its tags."""
    async with tx() as session:
        return StepRead.of(await runs.set_feedback(session, step_id, body))


_MAX_SEQ_ID = 2_147_483_647  # a run's event numbers are 32-bit integers


class RunStreamRequest(BaseModel):
    starting_after: int = Field(0, ge=0, le=_MAX_SEQ_ID, description="Resume after this seq_id; 0 replays from the start.")
    include_pings: bool = True
    poll_interval: float = Field(0.1, gt=0, le=5, description="Seconds between checks for new events.")
    batch_size: int = Field(100, ge=1, le=1000)


@router.post("/v1/runs/{run_id}/stream", response_class=StreamingResponse, responses=EVENT_STREAM)
async def stream_run(
    run_id: RunId, runtime: RuntimeDep, caller: CallerDep, tx: TransactionDep, body: RunStreamRequest | None = None
) -> StreamingResponse:
    """A background run's events as Server-Sent Events: those stored after `starting_after` at once,
    then new ones as they come, until the run ends. A finished run replays completely."""
    async with tx() as session:
        await runs.get_run(session, run_id)  # an unknown run is a 404, before the stream starts
    options = body or RunStreamRequest()
    events = follow(
        runtime,
        caller,
        run_id,
        starting_after=options.starting_after,
        poll_seconds=options.poll_interval,
        batch=options.batch_size,
    )
    return StreamingResponse(sse(None, events), media_type="text/event-stream")
