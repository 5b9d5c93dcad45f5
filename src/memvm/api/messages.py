from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Annotated, Any, Literal

from fastapi import Depends, Path, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from memvm.actors import Caller
from memvm.agents import letta_messages
from memvm.api.auth import CallerDep
from memvm.api.deps import AgentId, ReadDep, RuntimeDep, Transaction, page_params
from memvm.api.routers import api_router
from memvm.api.schemas import LettaMessage
from memvm.api.sse import EVENT_STREAM, JSON_OR_EVENT_STREAM, sse
from memvm.conversations import service as conversations
from memvm.conversations.thread import ThreadRef
from memvm.db.pagination import PageRequest
from memvm.errors import InvalidInput
from memvm.ids import id_pattern
from memvm.messages.schemas import LettaResponse, SendRequest
from memvm.runs.schemas import RunRead
from memvm.runtime.loop import background
from memvm.runtime.loop.background import follow, start_background
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.send import send
from memvm.threads import DEFAULT_CONVERSATION

router = api_router(tags=["messages"])
_FINAL = {"stop_reason", "usage_statistics", "error_message", "ping"}


@router.post("/v1/agents/{agent_id}/messages", response_model=LettaResponse, responses=JSON_OR_EVENT_STREAM)
async def send_message(agent_id: AgentId, body: SendRequest, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Send messages and run the agent's turn; `streaming=true` answers with Server-Sent Events."""
    return await answer_send(runtime, caller, ThreadRef.default_of(agent_id), body)


@router.post("/v1/agents/{agent_id}/messages/stream", response_class=StreamingResponse, responses=EVENT_STREAM)
async def stream_message(agent_id: AgentId, body: SendRequest, runtime: RuntimeDep, caller: CallerDep) -> StreamingResponse:
    """Send messages and stream the turn as Server-Sent Events (one event per stored message). With
    `background: true` the turn runs on even if this connection drops; resume with POST
    /v1/runs/{run_id}/stream and `starting_after` (each event carries its `seq_id`)."""
    return await stream_send(runtime, caller, ThreadRef.default_of(agent_id), body)


@router.post("/v1/agents/{agent_id}/messages/async", response_model=RunRead)
async def send_message_async(agent_id: AgentId, body: SendRequest, runtime: RuntimeDep, caller: CallerDep) -> RunRead:
    """Queue the turn and answer with its run at once; poll GET /v1/runs/{id}, read
    /v1/runs/{id}/messages, or stream it with POST /v1/runs/{id}/stream."""
    return RunRead.of(await start_background(runtime, caller, ThreadRef.default_of(agent_id), body))


class CancelRequest(BaseModel):
    run_ids: list[str] | None = None


@router.post("/v1/agents/{agent_id}/messages/cancel", response_model=dict[str, str])
async def cancel_runs(
    agent_id: AgentId, runtime: RuntimeDep, caller: CallerDep, body: CancelRequest | None = None
) -> dict[str, str]:
    """Stop the agent's active runs (or those of `run_ids`) at their next safe point, on whichever
    replica runs them: during a model call or between steps. Nothing of an unfinished step is kept;
    the run ends `cancelled`. Answers {run_id: "cancelled"} for each run asked to stop."""
    asked = await background.cancel_runs(runtime, caller, agent_id, body.run_ids if body else None)
    return dict.fromkeys(asked, "cancelled")


@router.get("/v1/agents/{agent_id}/messages", response_model=list[LettaMessage])
async def list_messages(
    agent_id: AgentId,
    read: ReadDep,
    before: str | None = Query(None, description="Only messages older than this message id."),
    after: str | None = Query(None, description="Only messages newer than this message id."),
    limit: int = Query(100, ge=1, le=1000),
    order: Literal["asc", "desc"] = Query("desc", description="desc: the newest `limit`; pages are chronological."),
    include_return_message_types: Annotated[list[str] | None, Query()] = None,
    conversation_id: str | None = Query(None, description="`default` (the agent's own history, also when absent) or conv-…"),
) -> list[dict[str, Any]]:
    """The history of one of the agent's conversations, one chronological page at a time."""
    ref = ThreadRef.of(conversation_id or DEFAULT_CONVERSATION, agent_id)
    types = include_return_message_types
    return await thread_history(read, ref, before=before, after=after, limit=limit, order=order, types=types)


async def thread_history(
    read: Transaction,
    ref: ThreadRef,
    *,
    before: str | None,
    after: str | None,
    limit: int,
    order: Literal["asc", "desc"],
    types: list[str] | None,
) -> list[dict[str, Any]]:
    """A chronological page of the history of the conversation `ref` names (it only reads)."""
    async with read() as session:
        thread = await conversations.open_thread(session, ref)
        return await letta_messages.of_agent(
            session, thread.agent.id, thread.conversation_id, limit=limit, order=order, before=before, after=after, types=types
        )


@router.get("/v1/messages/", response_model=list[LettaMessage])
async def list_organization_messages(
    read: ReadDep,
    page: Annotated[PageRequest, Depends(page_params(100, "desc"))],
    conversation_id: str | None = Query(None, description="Only messages of this conversation (conv-…)."),
    include_return_message_types: Annotated[list[str] | None, Query()] = None,
) -> list[dict[str, Any]]:
    """Every agent's messages in your organization, newest first by default; cursors are message ids."""
    async with read() as session:
        return await letta_messages.of_organization(
            session, page, conversation_id=conversation_id, types=include_return_message_types
        )


@router.get("/v1/messages/{message_id}", response_model=list[LettaMessage])
async def retrieve_message(
    message_id: Annotated[str, Path(pattern=id_pattern("message"))], read: ReadDep
) -> list[dict[str, Any]]:
    """One stored message, as the Letta messages it expands to."""
    async with read() as session:
        return await letta_messages.of_message(session, message_id)


Events = AsyncGenerator[dict[str, Any], None]


async def answer_send(runtime: RuntimeDeps, caller: Caller, ref: ThreadRef, body: SendRequest) -> Any:
    """A send answered with a LettaResponse, or with Server-Sent Events when `streaming`."""
    if body.stream_tokens and not body.streaming:
        raise InvalidInput("stream_tokens needs streaming=true (or use the /messages/stream route).")
    if body.streaming:
        return await stream_send(runtime, caller, ref, body)
    events, _ = await _start(runtime, caller, ref, body)
    return await _collect(events)


async def stream_send(runtime: RuntimeDeps, caller: Caller, ref: ThreadRef, body: SendRequest) -> StreamingResponse:
    """A send answered with Server-Sent Events; a background one is queued (a refusal is an HTTP
    error, before anything is queued) and followed from its stored events."""
    if body.background:
        run = await start_background(runtime, caller, ref, body)
        events = follow(runtime, caller, run.id, starting_after=0, poll_seconds=0.1, batch=100)
        return StreamingResponse(sse(None, events), media_type="text/event-stream")
    events, ready = await _start(runtime, caller, ref, body)
    return StreamingResponse(sse(ready if body.include_pings else None, events), media_type="text/event-stream")


async def _start(runtime: RuntimeDeps, caller: Caller, ref: ThreadRef, body: SendRequest) -> tuple[Events, dict[str, Any]]:
    """The turn's events and its first one (a ping): an unknown or busy conversation raises before
    the ping, as a plain HTTP error."""
    events = send(runtime, caller, ref, body)
    return events, await anext(events)


async def _collect(events: Events) -> LettaResponse:
    async with aclosing(events):
        collected = [event async for event in events]
    return LettaResponse(
        messages=[event for event in collected if event["message_type"] not in _FINAL],
        stop_reason=next(event for event in collected if event["message_type"] == "stop_reason"),
        usage=next(event for event in collected if event["message_type"] == "usage_statistics"),
    )
