"""Console: the conversation timeline (grouped by run and step), sending a message and watching the
turn stream in, answering a pending approval, and cancelling a running turn.

A message sent from the console runs as a background run (as POST /v1/agents/{id}/messages/async):
the POST starts it, and the page follows it over Server-Sent Events from the run's stored events
(as POST /v1/runs/{id}/stream does), so a dropped connection loses nothing and resumes by seq_id."""

from collections.abc import AsyncIterator
from itertools import groupby
from typing import Annotated, Any, Literal

from fastapi import Form, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from memvm.actors import Caller
from memvm.agents import letta_messages
from memvm.agents import service as agents
from memvm.api.console.session import PREFIX, ConsoleCaller, ConsoleTx, console_router, page, templates
from memvm.api.deps import AgentId, RuntimeDep
from memvm.conversations.thread import ThreadRef
from memvm.errors import NotFound
from memvm.ids import id_pattern
from memvm.messages.schemas import SendRequest
from memvm.runs import service as runs
from memvm.runtime.loop.background import cancel_runs, follow, start_background
from memvm.runtime.loop.deps import RuntimeDeps

router = console_router(f"{PREFIX}/agents/{{agent_id}}")
MESSAGES_PER_PAGE = 50
RunId = Annotated[str, Path(pattern=id_pattern("run"))]
# Turn-ending events: shown once the run is over, at the foot of the streamed messages.
_CLOSING = {"stop_reason", "usage_statistics", "error_message"}


@router.get("/timeline")
async def timeline(
    request: Request,
    agent_id: AgentId,
    tx: ConsoleTx,
    before: Annotated[str | None, Query(pattern=id_pattern("message"))] = None,
    after_run: bool = False,
) -> Response:
    """The newest MESSAGES_PER_PAGE messages (before `before`), oldest first, under their runs and
    steps. `after_run`: loaded when a turn ended, so the prompt and context sections reload too, and
    the block cards nobody is editing (static/console.js)."""
    async with tx() as session:
        agent = await agents.get_agent(session, agent_id)
        found = await letta_messages.of_agent(
            session, agent_id, limit=MESSAGES_PER_PAGE, order="desc", before=before, after=None, types=None
        )
        run_of = await runs.runs_by_ids(session, sorted({m["run_id"] for m in found if m.get("run_id")}))
    groups = [
        {
            "run": run_of.get(run_id) if run_id else None,
            "steps": [list(step) for _, step in groupby(in_run, key=lambda m: m.get("step_id"))],
        }
        for run_id, in_run in ((key, list(items)) for key, items in groupby(found, key=lambda m: m.get("run_id")))
    ]
    older = found[0]["id"] if len(found) == MESSAGES_PER_PAGE else None
    response = page(request, "_timeline.html", agent=agent, groups=groups, older=older, pending=agent.pending_approval)
    if after_run:
        response.headers["hx-trigger"] = "memory-changed, turn-ended"
    return response


@router.post("/messages")
async def send_message(
    request: Request, runtime: RuntimeDep, agent_id: AgentId, caller: ConsoleCaller, text: Annotated[str, Form()]
) -> Response:
    """Start the turn in the background and answer with the live view that follows it."""
    return await _start(request, runtime, caller, agent_id, SendRequest(input=text), sent=text)


@router.post("/approvals")
async def answer_approval(
    request: Request,
    runtime: RuntimeDep,
    agent_id: AgentId,
    caller: ConsoleCaller,
    tool_call_id: Annotated[str, Form(max_length=200)],
    decision: Annotated[Literal["approve", "deny"], Form()],
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """Approve or deny one waiting tool call; the turn goes on (as an `approval` message does)."""
    answer = {"type": "approval", "tool_call_id": tool_call_id, "approve": decision == "approve", "reason": reason or None}
    body = SendRequest.model_validate({"messages": [{"type": "approval", "approvals": [answer]}]})
    return await _start(request, runtime, caller, agent_id, body, sent=f"{decision.capitalize()} {tool_call_id}")


@router.post("/cancel")
async def cancel(request: Request, runtime: RuntimeDep, agent_id: AgentId, caller: ConsoleCaller) -> Response:
    """Stop the agent's active runs (as POST /v1/agents/{id}/messages/cancel)."""
    asked = await cancel_runs(runtime, caller, agent_id, None)
    message = f"Asked {len(asked)} run(s) to stop." if asked else "No run of this agent is active."
    return page(request, "_flash.html", message=message, kind="notice")


@router.get("/runs/{run_id}/stream")
async def stream_run(
    runtime: RuntimeDep,
    agent_id: AgentId,
    run_id: RunId,
    caller: ConsoleCaller,
    tx: ConsoleTx,
    last_event_id: Annotated[int, Header(ge=0)] = 0,
) -> Response:
    """The run's messages as HTML fragments over SSE, then `done`; EventSource resumes after
    Last-Event-ID when the connection drops."""
    async with tx() as session:
        run = await runs.get_run(session, run_id)
    if run.agent_id != agent_id:
        raise NotFound(f"Run {run_id!r} is not a run of agent {agent_id!r}.")
    events = follow(runtime, caller, run_id, starting_after=last_event_id, poll_seconds=0.1, batch=100)
    return StreamingResponse(_fragments(events), media_type="text/event-stream", headers={"cache-control": "no-store"})


async def _start(
    request: Request, runtime: RuntimeDeps, caller: Caller, agent_id: str, body: SendRequest, *, sent: str
) -> Response:
    """`sent`: what the operator sent, shown at once above the streamed reply."""
    run = await start_background(runtime, caller, ThreadRef.default_of(agent_id), body)
    return page(request, "_live.html", agent_id=agent_id, run=run, sent=sent)


async def _fragments(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    template = templates().env.get_template("_message.html")
    async for event in events:
        fragment = template.render(message=event)
        lines = "".join(f"data: {line}\n" for line in fragment.splitlines() or [""])
        name = "closing" if event.get("message_type") in _CLOSING else "message"
        yield f"id: {event.get('seq_id', '')}\nevent: {name}\n{lines}\n"
    yield "event: done\ndata: done\n\n"
