"""Sending to a conversation: take its turn lock, replay a repeated otid, else run a turn."""

from collections.abc import AsyncGenerator
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

from memvm.actors import Caller
from memvm.conversations import service as conversations
from memvm.conversations.thread import ThreadRef
from memvm.db.engine import database_unreachable
from memvm.db.uow import transaction
from memvm.ids import new_id
from memvm.messages import service as messages
from memvm.messages.letta_format import to_letta
from memvm.messages.schemas import SendRequest
from memvm.orm import Message, Run
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.run_end import fail_when_reachable
from memvm.runtime.loop.turn import Turn


def ready(run_id: str | None = None) -> dict[str, Any]:
    """First item of every send stream (a Letta `ping`): the lock is held and the turn has started,
    so errors from here on are reported in-band; errors before it are plain HTTP errors."""
    return {
        "message_type": "ping",
        "id": new_id("ping"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_id": run_id,
    }


async def send(
    deps: RuntimeDeps, caller: Caller, ref: ThreadRef, request: SendRequest, run_id: str | None = None
) -> AsyncGenerator[dict[str, Any], None]:
    """A ping (see `ready`), then the turn's events. The conversation's turn lock is held until the
    iterator is exhausted or closed. `run_id`: a background run created when the send was queued."""
    async with deps.turn_lock(caller.organization_id, ref.lock_key) as lock_lost:
        replayed = await _stored_result(deps, caller, ref, request)
        if replayed is not None:
            yield ready()
            for event in replayed:
                yield event
            return
        turn = await Turn.start(deps, caller, ref, request, run_id, lock_lost)
        yield ready(turn.run_id)
        # aclosing: a client that goes away closes this generator, and the turn must hear of it.
        async with aclosing(turn.events()) as events:
            try:
                async for event in events:
                    yield event
            except Exception as failure:
                # The turn could not store its end. A background run's task stores it (background.py).
                if run_id is None and database_unreachable(failure):
                    fail_when_reachable(deps, caller.organization_id, turn.run_id)
                raise


async def _stored_result(deps: RuntimeDeps, caller: Caller, ref: ThreadRef, request: SendRequest) -> list[dict[str, Any]] | None:
    """The stored outcome of an earlier send whose input carried one of these otids (SDK retries)."""
    otids = request.otids()
    if not otids:
        return None
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        thread = await conversations.open_thread(session, ref)
        for otid in otids:
            found = await messages.run_of_otid(session, thread.agent.id, otid)
            if found is not None:
                return _replay(thread.agent.agent_type, *found)
    return None


def _replay(agent_type: str, run: Run, stored: list[Message]) -> list[dict[str, Any]]:
    shown = [
        letta for message in stored if message.role in ("assistant", "tool") for letta in to_letta(message, agent_type=agent_type)
    ]
    # A run still marked running was cut off by a crash: what it stored is all there is.
    stop_reason = run.stop_reason or "error"
    usage = run.usage or {"message_type": "usage_statistics", "run_ids": [run.id]}
    return [*shown, {"message_type": "stop_reason", "stop_reason": stop_reason}, usage]
