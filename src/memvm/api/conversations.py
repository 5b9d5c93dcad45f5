"""Conversations (letta-client's `conversations` resource): many threads per agent over its shared
memory. Where a route takes `default` (with `agent_id`) or an agent's id in the conversation's
place, it acts on the agent's own history, as /v1/agents/{id}/messages… do."""

from typing import Annotated, Any, Literal

from fastapi import Body, Path, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from memvm.api.auth import CallerDep
from memvm.api.deps import ReadDep, RuntimeDep, TransactionDep
from memvm.api.messages import answer_send, thread_history
from memvm.api.routers import api_router
from memvm.api.runs import RunStreamRequest
from memvm.api.schemas import LettaMessage
from memvm.api.sse import EVENT_STREAM, JSON_OR_EVENT_STREAM, sse
from memvm.conversations import service as conversations
from memvm.conversations.schemas import (
    ArchiveStatus,
    CompactionResult,
    ConversationCreate,
    ConversationOrder,
    ConversationRead,
    ConversationUpdate,
)
from memvm.conversations.thread import ThreadRef
from memvm.ids import id_pattern
from memvm.messages.schemas import LettaResponse, SendRequest
from memvm.runs import service as runs
from memvm.runtime.loop.background import cancel_conversation_runs, follow
from memvm.runtime.operations import context_window as window_operations

router = api_router(tags=["conversations"])
_UUID = id_pattern("conv").removeprefix("^conv-").removesuffix("$")
ConversationId = Annotated[str, Path(pattern=id_pattern("conv"), description="conv-<uuid4>")]
ThreadName = Annotated[
    str,
    Path(
        pattern=rf"^(default|conv-{_UUID}|agent-{_UUID})$",
        description="conv-<uuid4>, or `default` (with agent_id) for the agent's own history",
    ),
]


class ConversationSend(SendRequest):
    """A send to a conversation: streams unless `streaming: false`; `agent_id` names the agent
    whose `default` conversation is meant."""

    streaming: bool = True
    agent_id: str | None = Field(None, pattern=id_pattern("agent"))


class ThreadOptions(BaseModel):
    """The body of recompile and compact: `agent_id` for `default`; compaction settings are taken
    and not used (memvm compacts with the conversation's own model)."""

    model_config = ConfigDict(extra="ignore")

    agent_id: str | None = Field(None, pattern=id_pattern("agent"))
    compaction_settings: dict[str, Any] | None = None


class ConversationStreamRequest(RunStreamRequest):
    """Which run to follow: `run_id`, else the run whose send carried `otid`, else the
    conversation's newest active run."""

    agent_id: str | None = Field(None, pattern=id_pattern("agent"))
    run_id: str | None = Field(None, pattern=id_pattern("run"))
    otid: str | None = Field(None, max_length=200)


@router.post("/v1/conversations/", response_model=ConversationRead)
async def create_conversation(
    caller: CallerDep,
    tx: TransactionDep,
    agent_id: str = Query(..., pattern=id_pattern("agent"), description="The agent the conversation belongs to."),
    body: Annotated[ConversationCreate | None, Body()] = None,
) -> ConversationRead:
    """A new, empty conversation of the agent over its shared memory; `isolated_block_labels` gives
    it its own copies of those blocks."""
    async with tx() as session:
        created = await conversations.create_conversation(session, agent_id, body or ConversationCreate(), actor=caller.actor)
        return await conversations.read(session, created)


@router.get("/v1/conversations/", response_model=list[ConversationRead])
async def list_conversations(
    tx: TransactionDep,
    agent_id: str | None = Query(None, pattern=id_pattern("agent"), description="Only this agent's conversations."),
    after: str | None = Query(None, description="Cursor: a conversation id from the previous page."),
    limit: int = Query(50, ge=1, le=1000),
    order: Literal["asc", "desc"] = Query("desc"),
    order_by: Annotated[ConversationOrder, Query()] = "created_at",
    archive_status: Annotated[ArchiveStatus, Query()] = "unarchived",
    summary_search: str | None = Query(None, max_length=500, description="Text the summary contains (any case)."),
) -> list[ConversationRead]:
    """Conversations, newest first by default; hidden ones are never listed."""
    async with tx() as session:
        return await conversations.list_conversations(
            session,
            agent_id=agent_id,
            archive_status=archive_status,
            summary_search=summary_search,
            order_by=order_by,
            order=order,
            after=after,
            limit=limit,
        )


@router.get("/v1/conversations/{conversation_id}", response_model=ConversationRead)
async def retrieve_conversation(conversation_id: ConversationId, tx: TransactionDep) -> ConversationRead:
    """One conversation, with the ids of the messages in its context window."""
    async with tx() as session:
        return await conversations.read(session, await conversations.get_conversation(session, conversation_id), with_window=True)


@router.patch("/v1/conversations/{conversation_id}", response_model=ConversationRead)
async def update_conversation(
    conversation_id: ConversationId, body: ConversationUpdate, caller: CallerDep, tx: TransactionDep
) -> ConversationRead:
    """Change what is sent; `archived: true` makes the conversation read-only, `false` reopens it."""
    async with tx() as session:
        updated = await conversations.update_conversation(session, conversation_id, body, actor=caller.actor)
        return await conversations.read(session, updated)


@router.delete("/v1/conversations/{conversation_id}", status_code=204)
async def delete_conversation(conversation_id: ConversationId, caller: CallerDep, tx: TransactionDep) -> Response:
    """The conversation, its messages, runs and isolated blocks; the agent's shared memory stays."""
    async with tx() as session:
        await conversations.delete_conversation(session, conversation_id, actor=caller.actor)
    return Response(status_code=204)


@router.post("/v1/conversations/{conversation_id}/messages", response_model=LettaResponse, responses=JSON_OR_EVENT_STREAM)
async def send_message(conversation_id: ThreadName, body: ConversationSend, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Send and run a turn in the conversation (Server-Sent Events unless `streaming: false`).
    Turns of different conversations of one agent run at the same time; one conversation's wait."""
    return await answer_send(runtime, caller, ThreadRef.of(conversation_id, body.agent_id), body)


@router.get("/v1/conversations/{conversation_id}/messages", response_model=list[LettaMessage])
async def list_conversation_messages(
    conversation_id: ThreadName,
    read: ReadDep,
    agent_id: str | None = Query(None, pattern=id_pattern("agent"), description="For `default`: the agent."),
    before: str | None = Query(None, description="Only messages older than this message id."),
    after: str | None = Query(None, description="Only messages newer than this message id."),
    limit: int = Query(100, ge=1, le=1000),
    order: Literal["asc", "desc"] = Query("desc", description="desc: the newest `limit`; pages are chronological."),
    include_return_message_types: Annotated[list[str] | None, Query()] = None,
) -> list[dict[str, Any]]:
    """The conversation's history, one chronological page at a time."""
    ref = ThreadRef.of(conversation_id, agent_id)
    types = include_return_message_types
    return await thread_history(read, ref, before=before, after=after, limit=limit, order=order, types=types)


@router.post("/v1/conversations/{conversation_id}/stream", response_class=StreamingResponse, responses=EVENT_STREAM)
async def stream_conversation(
    conversation_id: ThreadName,
    runtime: RuntimeDep,
    caller: CallerDep,
    tx: TransactionDep,
    body: ConversationStreamRequest | None = None,
) -> StreamingResponse:
    """Resume a run of the conversation from `starting_after` (each event carries its seq_id)."""
    options = body or ConversationStreamRequest()
    async with tx() as session:
        thread = await conversations.open_thread(session, ThreadRef.of(conversation_id, options.agent_id))
        if options.run_id is not None:
            run = await runs.get_run(session, options.run_id)
        else:
            run = await runs.run_to_follow(session, thread.agent.id, thread.conversation_id, otid=options.otid)
    events = follow(
        runtime,
        caller,
        run.id,
        starting_after=options.starting_after,
        poll_seconds=options.poll_interval,
        batch=options.batch_size,
    )
    return StreamingResponse(sse(None, events), media_type="text/event-stream")


@router.post("/v1/conversations/{conversation_id}/cancel", response_model=dict[str, Any])
async def cancel_conversation(
    conversation_id: ThreadName,
    runtime: RuntimeDep,
    caller: CallerDep,
    agent_id: str | None = Query(None, pattern=id_pattern("agent"), description="For `default`: the agent."),
) -> dict[str, Any]:
    """Stop the conversation's active runs at their next safe point: {run_id: "cancelled"}."""
    asked = await cancel_conversation_runs(runtime, caller, ThreadRef.of(conversation_id, agent_id))
    return dict.fromkeys(asked, "cancelled")


@router.post("/v1/conversations/{conversation_id}/recompile", response_model=str)
async def recompile_conversation(
    conversation_id: ThreadName,
    tx: TransactionDep,
    dry_run: bool = Query(False, description="Compile without storing."),
    body: ThreadOptions | None = None,
) -> str:
    """The system prompt the conversation's next turn starts with, compiled from memory as it is now."""
    async with tx() as session:
        thread = await conversations.open_thread(session, ThreadRef.of(conversation_id, body.agent_id if body else None))
        return await conversations.recompile(session, thread, dry_run=dry_run)


@router.post("/v1/conversations/{conversation_id}/compact", response_model=CompactionResult)
async def compact_conversation(
    conversation_id: ThreadName, runtime: RuntimeDep, caller: CallerDep, body: ThreadOptions | None = None
) -> dict[str, Any]:
    """Summarize the conversation's whole context window into one message now."""
    ref = ThreadRef.of(conversation_id, body.agent_id if body else None)
    return await window_operations.summarize(runtime, caller, ref)


@router.post("/v1/conversations/{conversation_id}/fork", response_model=ConversationRead)
async def fork_conversation(
    conversation_id: ThreadName,
    caller: CallerDep,
    tx: TransactionDep,
    agent_id: str | None = Query(None, pattern=id_pattern("agent"), description="For `default`: the agent."),
    hidden: bool = Query(False, description="Keep the fork out of listings."),
    message_id: str | None = Query(None, pattern=id_pattern("message"), description="Copy history up to this message."),
) -> ConversationRead:
    """A new conversation holding a copy of this one's history (up to `message_id`), its window,
    overrides and isolated blocks; the agent's shared memory is shared by both."""
    async with tx() as session:
        source = await conversations.open_thread(session, ThreadRef.of(conversation_id, agent_id))
        forked = await conversations.fork(session, source, message_id=message_id, hidden=hidden, actor=caller.actor)
        return await conversations.read(session, forked)
