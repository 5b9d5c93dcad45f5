"""One agent turn: the step loop.

Each step calls the model once, then stores the assistant message, runs its tool calls and
stores their results in ONE transaction, so history never holds an unpaired tool call. The turn
keeps the system prompt it started with: memory edits reach the model from the next turn on.
No transaction is ever held across a model call.
"""

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.actors import Actor, Caller
from memvm.conversations import service as conversations
from memvm.conversations.thread import Thread, ThreadRef
from memvm.db.uow import transaction
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import ContextWindowExceeded, LLMError
from memvm.ids import new_id
from memvm.llm.types import ChatMessage, Completion, ModelRequest, ToolCall, ToolSpec
from memvm.messages.letta_format import error_message
from memvm.messages.schemas import MessageCreate, SendRequest
from memvm.orm import Agent, Message, Step
from memvm.prompts.service import recompiles_at_end
from memvm.runs import service as runs
from memvm.runs.clock import RunClock
from memvm.runtime.loop import autoclear, model_call, policy
from memvm.runtime.loop.approvals import (
    Answer,
    Waiting,
    WaitKind,
    answer_message,
    answered_outcome,
    answers_to_pending,
    pending_record,
    waiting_calls,
    without,
)
from memvm.runtime.loop.compaction import CompactionError, check_fixed_part, compact
from memvm.runtime.loop.conversation import ChatHistory
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.model_call import RunCancelled
from memvm.runtime.loop.models import AgentModel, resolve_model
from memvm.runtime.loop.policy import RuleTrack, StepEnd
from memvm.runtime.loop.step_rows import for_client, heartbeat, row_base, step_head
from memvm.runtime.loop.tokens import estimate_message, estimate_tools
from memvm.runtime.loop.turn_lock import TurnLockLost
from memvm.runtime.loop.turn_tools import outside_calls, turn_tools
from memvm.runtime.loop.usage import StepMeter, Usage
from memvm.runtime.loop.window import over_budget
from memvm.runtime.tools.context import ToolContext
from memvm.runtime.tools.executor import execute_all
from memvm.runtime.tools.inputs import EmbeddedInputs, embed_tool_inputs
from memvm.runtime.tools.mcp_calls import mcp_calls
from memvm.runtime.tools.outcome import ToolOutcome
from memvm.runtime.tools.sandboxed import CustomCalls
from memvm.search.tuning import SearchTuning
from memvm.tools import service as tools
from memvm.tools.builtin import HEARTBEAT_AGENT_TYPES

log = logging.getLogger(__name__)


@dataclass
class Turn:
    """State of one running turn. Create with `Turn.start` while holding the agent's turn lock."""

    deps: RuntimeDeps
    thread: Thread  # the agent, and the conversation the turn runs in
    agent_model: AgentModel
    run_id: str
    request: SendRequest
    system_prompt: str
    tool_specs: list[ToolSpec]
    history: ChatHistory
    pending_inputs: list[MessageCreate]
    custom_calls: CustomCalls
    track: RuleTrack
    waiting: Waiting  # which calls stop the turn for the client
    answers: dict[str, Answer] | None = None  # the client's answers to what the agent waits on
    offered_specs: list[ToolSpec] = field(default_factory=list)  # this step's tools, after the rules
    offered_tokens: int = 0  # their estimate
    meter: StepMeter = field(default_factory=lambda: StepMeter(None))  # this step's row
    failed_step: Step | None = None  # a model call that failed: recorded when the run finishes
    clock: RunClock = field(default_factory=RunClock)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)  # set when the run is asked to stop
    lock_lost: asyncio.Event = field(default_factory=asyncio.Event)  # set if the turn lock's connection ended
    usage: Usage = field(default_factory=Usage)
    invalid_streak: int = 0
    last_prompt_tokens: int = 0
    streamed_message_id: str | None = None
    embedding: EmbeddingModel | None = None
    finished: bool = False  # the run's end is stored (by the last step's transaction)

    @property
    def agent(self) -> Agent:
        return self.thread.agent

    @classmethod
    async def start(
        cls,
        deps: RuntimeDeps,
        caller: Caller,
        ref: ThreadRef,
        request: SendRequest,
        run_id: str | None,
        lock_lost: asyncio.Event | None = None,
    ) -> "Turn":
        async with transaction(deps.sessionmaker, caller.organization_id) as session:
            thread = await conversations.open_thread(session, ref, for_write=True)
            agent, conversation_id = thread.agent, thread.conversation_id
            answers = answers_to_pending(thread, request)
            agent_model = resolve_model(agent, deps.models, deps.settings, thread.conversation)
            attached = await tools.agent_tools(session, agent.id)
            mcp = await mcp_calls(session, deps.mcp, deps.sessionmaker, attached, deps.settings.mcp_call_timeout_seconds)
            window = await deps.windows.read(session, agent.organization_id, agent.id, conversation_id)
            system_prompt = await conversations.system_prompt(session, thread)
            run = await runs.start_run(session, agent.id, conversation_id, request_config=request.run_config(), run_id=run_id)
            await conversations.note_send(session, thread)
        embedder = deps.embedders.for_handle(agent.embedding)
        offer = turn_tools(agent, attached, request)
        return cls(
            deps=deps,
            thread=thread,
            agent_model=agent_model,
            run_id=run.id,
            request=request,
            system_prompt=system_prompt,
            tool_specs=offer.specs,
            track=offer.track,
            waiting=offer.waiting,
            answers=answers,
            cancelled=deps.cancels.watch(run.id),
            lock_lost=lock_lost or asyncio.Event(),
            history=window.history,
            pending_inputs=request.input_messages(),
            custom_calls=outside_calls(deps, agent, offer.custom, offer.mcp, mcp),
            embedding=EmbeddingModel.of(embedder),
        )

    async def events(self) -> AsyncGenerator[dict[str, Any], None]:
        """Letta messages as each step is stored, then stop_reason and usage_statistics, and an
        error_message when the turn failed. A cancelled turn (client gone) keeps its stored steps."""
        stop_reason, error = "max_steps", None
        try:
            steps = [self._resolve()] if self.answers is not None else []
            for step in itertools.chain(steps, (self._step() for _ in range(self.request.max_steps))):
                if await self.deps.cancels.requested(self.run_id, self.deps.sessionmaker, self.agent.organization_id):
                    stop_reason = "cancelled"
                    break
                step_end = None
                async for event in step:
                    if isinstance(event, StepEnd):
                        step_end = event
                    else:
                        self.clock.saw_event()
                        yield event
                if step_end is not None and step_end.stop_reason is not None:
                    stop_reason, error = step_end.stop_reason, step_end.error
                    break
        except TurnLockLost as lost:
            log.warning("turn %s of agent %s stopped: %s", self.run_id, self.agent.id, lost)
            stop_reason, error = "error", str(lost)
        except Exception:
            log.exception("turn %s of agent %s failed", self.run_id, self.agent.id)
            stop_reason, error = "error", "The turn failed with an internal error; the server log has the details."
        except BaseException:
            # Cancellation may be level-triggered (anyio): only a shielded task can still write.
            await asyncio.shield(self._finish("cancelled"))
            raise
        await self._finish(stop_reason)
        yield {"message_type": "stop_reason", "stop_reason": stop_reason}
        yield self.usage.as_letta(self.run_id)
        if error is not None:
            yield error_message(self.run_id, stop_reason, error)

    async def _step(self) -> AsyncIterator[dict[str, Any] | StepEnd]:
        """One step: (compact if needed) → model → store. Yields token deltas, the stored step's
        Letta messages, and finally a StepEnd."""
        completion = None
        offered = set(self.track.offered())
        self.offered_specs = [spec for spec in self.tool_specs if spec.name in offered]
        self.offered_tokens = estimate_tools(self.offered_specs)
        self.meter = StepMeter(self.agent.model or self.deps.settings.default_model or self.agent_model.name)
        try:
            await self._make_room()
            self.meter.model_started = time.monotonic()
            self.streamed_message_id = stream_id = new_id("message") if self.request.stream_tokens else None
            model, request = self.agent_model.model, self._model_request()
            async for item in model_call.call(model, request, self.cancelled, stream_id=stream_id, run_id=self.run_id):
                if isinstance(item, Completion):
                    completion = item
                else:
                    yield item
        except ContextWindowExceeded as overflow:
            yield await self._after_overflow(overflow)
            return
        except LLMError as failure:
            self.failed_step = self.meter.failed(row_base(self.thread, self.run_id), failure)
            yield StepEnd("llm_api_error", failure.message)
            return
        except CompactionError as failure:
            yield StepEnd("error", str(failure))
            return
        except RunCancelled:
            yield StepEnd("cancelled")
            return
        if completion is None:  # the ChatModel port promises one; a broken adapter fails the turn
            raise RuntimeError(f"the model stream of run {self.run_id} ended without a completion")
        self.meter.model_ended = time.monotonic()
        completion = self.track.prefill(completion)
        waiting = self.waiting.calls(completion, offered)
        estimated = self._estimate_prompt()
        self.meter.tokens = self.usage.add(completion, estimated)
        self.last_prompt_tokens = completion.usage.prompt_tokens if completion.usage else estimated
        streamed = self.streamed_message_id
        inputs = await embed_tool_inputs(self.deps.embedders, self.deps.sessionmaker, self.agent, completion.tool_calls)
        sandboxed = await self.custom_calls.run(without(completion, waiting).tool_calls, frozenset(offered))
        shown, stop_reason = await self._store_step(completion, inputs, sandboxed, waiting)
        self.deps.embedding_wakeup.set()
        for letta in for_client(shown, self.request, self.agent.agent_type, streamed):
            yield letta
        yield StepEnd(stop_reason)

    def _model_request(self) -> ModelRequest:
        tool_choice: Literal["auto", "required"] | None = None
        if self.offered_specs:
            tool_choice = "required" if self.agent.agent_type in HEARTBEAT_AGENT_TYPES else "auto"
        return ModelRequest(
            model=self.agent_model.name,
            messages=[ChatMessage("system", self.system_prompt), *self.history.messages, *self._pending()],
            tools=self.offered_specs,
            tool_choice=tool_choice,
        )

    def _pending(self) -> list[ChatMessage]:
        return [ChatMessage(message.role, message.text) for message in self.pending_inputs]

    def _estimate_prompt(self) -> int:
        """The model request's estimate, the history's part kept as it grows (ChatHistory)."""
        around = [ChatMessage("system", self.system_prompt), *self._pending()]
        return self.history.tokens + sum(estimate_message(m) for m in around) + self.offered_tokens

    async def _make_room(self) -> None:
        """Compact before the call when the prompt would pass the trigger share of the window."""
        if over_budget(max(self._estimate_prompt(), self.last_prompt_tokens), self.agent_model.context_window):
            await self._compact(force=False)

    async def _compact(self, *, force: bool) -> None:
        check_fixed_part(self.system_prompt, self.tool_specs, self.agent_model.context_window)
        compacted = await compact(self.deps.sessionmaker, self.agent.organization_id, self.thread, self.agent_model, force=force)
        if compacted is not None:
            self.history = ChatHistory.of(compacted.window)
        self.last_prompt_tokens = 0

    async def _after_overflow(self, overflow: ContextWindowExceeded) -> StepEnd:
        """The provider refused the prompt as too long: compact everything, then the loop retries."""
        try:
            await self._compact(force=True)
        except (CompactionError, LLMError) as failure:
            return StepEnd(
                "context_window_overflow_in_system_prompt", f"{overflow.message} Compaction could not make room: {failure}"
            )
        return StepEnd()

    async def _resolve(self) -> AsyncIterator[dict[str, Any] | StepEnd]:
        """The step that answers what the agent waited on: approved calls run now (custom ones in
        the sandbox first), denied and client-run calls get the client's outcome; then the loop
        decides as after any step."""
        assert self.answers is not None and self.thread.pending_approval is not None
        self.meter = StepMeter(None)  # no model call in this step
        calls = waiting_calls(self.thread.pending_approval)
        settled = {call_id: outcome for call_id, answer in self.answers.items() if (outcome := answered_outcome(answer))}
        approved = Completion(None, tuple(call for call in calls if call.id not in settled))
        settled |= await self.custom_calls.run(approved.tool_calls, frozenset(call.name for call in calls))
        completion = Completion(None, tuple(calls))
        inputs = await embed_tool_inputs(self.deps.embedders, self.deps.sessionmaker, self.agent, approved.tool_calls)
        shown, stop_reason = await self._store_step(completion, inputs, settled, [])
        for letta in for_client(shown, self.request, self.agent.agent_type):
            yield letta
        yield StepEnd(stop_reason)

    async def _store_step(
        self,
        completion: Completion,
        inputs: EmbeddedInputs,
        settled: dict[str, ToolOutcome],
        waiting: list[tuple[ToolCall, WaitKind]],
    ) -> tuple[list[Message], str | None]:
        """One transaction: inputs (first step), the assistant message (or, answering a wait, the
        client's approval), every tool call's effects and result, and the heartbeat that hands
        control back. Calls that must wait for the client are recorded on the agent instead of
        run. Returns what the client is shown and the stop reason (None: take another step)."""
        if self.lock_lost.is_set():
            raise TurnLockLost(
                "The turn lost its lock on the agent (the database connection was lost) and stored nothing of its last "
                "step; another turn of this agent may have started since. Send again."
            )
        step_id = new_id("step")
        base = row_base(self.thread, self.run_id, step_id)
        pending = self.thread.pending_approval or {}
        async with transaction(self.deps.sessionmaker, self.agent.organization_id) as session:
            if self.answers is not None:
                head = [answer_message(pending, self.answers, self.request.approval(), base)]
            else:
                head = step_head(self.pending_inputs, completion, waiting, base, self.streamed_message_id)
            ready = without(completion, waiting)
            early = head if ready.tool_calls else []  # the calls may read the conversation: what the step said comes first
            if early:
                await runs.store_messages(session, early)
            context = ToolContext(
                session,
                self.agent.id,
                Actor("agent", self.agent.id, step_id, run_id=self.run_id),
                conversation_id=self.thread.conversation_id,
                message_id=head[-1].id if self.answers is None else pending.get("id"),
                run_id=self.run_id,
                timezone=self.agent.timezone,
                embedding=self.embedding,
                vectors=inputs.vectors,
                folder_vectors=inputs.folder_vectors,
                settled=settled,
                search=SearchTuning.of(self.deps.settings),
            )
            # Answering a wait, the calls were offered when made; the step's offer does not apply.
            allowed = completion.tool_calls if self.answers is not None else self.offered_specs
            async with recompiles_at_end(session):
                results, outcomes = await execute_all(context, ready.tool_calls, frozenset(e.name for e in allowed), base)
            stored, shown = [*head, *results], [*head[len(self.pending_inputs) :], *results]
            stop_reason = await self._conclude(session, ready, outcomes, (head[-1].id, waiting), base, stored)
            step = self.meter.row(step_id, base, calls=completion.tool_calls, stop_reason=stop_reason)
            await runs.store_step(session, step, stored[len(early) :])
            if stop_reason is not None:  # the last step: the run ends in its transaction
                if shown:
                    self.clock.saw_event()  # what the client is sent first is ready now
                await self._record_end(session, stop_reason)
            await session.flush()
        if stop_reason is not None:
            self._ended(stop_reason)
        self.streamed_message_id = None
        self.pending_inputs = []
        self.answers = None
        self.history.extend(stored)
        return shown, stop_reason

    async def _conclude(
        self,
        session: AsyncSession,
        ready: Completion,
        outcomes: list[ToolOutcome],
        held: tuple[str, list[tuple[ToolCall, WaitKind]]],
        base: dict[str, str | None],
        stored: list[Message],
    ) -> str | None:
        """After the step's calls ran: wait for the client, stop, or go on (with a heartbeat when the
        agent type or a broken rule asks for one). Adds what it would store to `stored`."""
        self.invalid_streak = self.invalid_streak + 1 if outcomes and all(o.invalid_call for o in outcomes) else 0
        self.track.record(ready, outcomes)
        request_id, waiting = held  # the assistant message that made the waiting calls, and the calls
        if waiting:
            await self.thread.set_pending_approval(session, pending_record(request_id, self.run_id, waiting))
            return "requires_approval"
        if self.thread.pending_approval is not None:
            await self.thread.set_pending_approval(session, None)
        decision = self.track.decide(self.agent.agent_type, ready, outcomes, self.invalid_streak)
        if decision.stop_reason is None and (decision.nudge or self.agent.agent_type in HEARTBEAT_AGENT_TYPES):
            why = decision.nudge or policy.heartbeat_reason(outcomes)
            stored.append(heartbeat(why, base))
        return decision.stop_reason

    async def _finish(self, stop_reason: str) -> None:
        """Ends the run, unless the last step's transaction already did."""
        self.deps.cancels.release(self.run_id)
        if self.finished:
            return
        async with transaction(self.deps.sessionmaker, self.agent.organization_id) as session:
            await self._record_end(session, stop_reason)
        self._ended(stop_reason)

    def _ended(self, stop_reason: str) -> None:
        """The run's end is committed: count the turn once, whichever transaction stored it."""
        self.finished = True
        metrics.TURNS.labels(stop_reason).inc()

    async def _record_end(self, session: AsyncSession, stop_reason: str) -> None:
        if self.failed_step is not None:
            runs.record_step(session, self.failed_step)
        await autoclear.clear_after_turn(session, self.thread, stop_reason)
        await conversations.note_run_end(session, self.thread)
        usage = self.usage.as_letta(self.run_id)
        await runs.finish_run(session, self.run_id, stop_reason=stop_reason, usage=usage, clock=self.clock)
