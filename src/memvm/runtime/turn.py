"""One agent turn: the step loop.

Each step calls the model once, then stores the assistant message, runs its tool calls and
stores their results in ONE transaction, so history never holds an unpaired tool call. The turn
keeps the system prompt it started with: memory edits reach the model from the next turn on.
No transaction is ever held across a model call.
"""

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from memvm.actors import Actor, Caller
from memvm.agents import service as agents
from memvm.db.uow import transaction
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import ContextWindowExceeded, LLMError
from memvm.ids import new_id
from memvm.llm.types import ChatMessage, Completion, ModelRequest, TextDelta, ToolCall, ToolSpec
from memvm.memory.tool_rules import ToolRules
from memvm.messages import service as messages
from memvm.messages.letta_format import to_letta
from memvm.messages.schemas import MessageCreate, SendRequest
from memvm.orm import Agent, Message
from memvm.runtime import policy
from memvm.runtime.compaction import CompactionError, compact
from memvm.runtime.conversation import heartbeat_text, to_chat, to_chat_all
from memvm.runtime.deps import RuntimeDeps
from memvm.runtime.models import AgentModel, resolve_model
from memvm.runtime.policy import RuleTrack
from memvm.runtime.tokens import estimate_message, estimate_text, estimate_tools
from memvm.runtime.tools.context import ToolContext
from memvm.runtime.tools.executor import execute
from memvm.runtime.tools.outcome import ToolOutcome
from memvm.runtime.tools.sandboxed import CustomCalls, CustomTool, agent_state, wants_network
from memvm.runtime.usage import Usage
from memvm.runtime.window import over_budget
from memvm.tools import service as tools
from memvm.tools.builtin import BUILTIN_SPECS, EMBEDDED_ARGUMENTS, HEARTBEAT_AGENT_TYPES, with_heartbeat

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepEnd:
    """Marks the end of a step inside the turn's event stream: stop (with a reason) or go on."""

    stop_reason: str | None = None
    error: str | None = None


@dataclass
class Turn:
    """State of one running turn. Create with `Turn.start` while holding the agent's turn lock."""

    deps: RuntimeDeps
    agent: Agent
    agent_model: AgentModel
    run_id: str
    request: SendRequest
    system_prompt: str
    tool_specs: list[ToolSpec]
    history: list[ChatMessage]
    pending_inputs: list[MessageCreate]
    custom_calls: CustomCalls
    track: RuleTrack
    offered_specs: list[ToolSpec] = field(default_factory=list)  # this step's tools, after the rules
    usage: Usage = field(default_factory=Usage)
    invalid_streak: int = 0
    last_prompt_tokens: int = 0
    streamed_message_id: str | None = None
    embedding: EmbeddingModel | None = None

    @classmethod
    async def start(cls, deps: RuntimeDeps, caller: Caller, agent_id: str, request: SendRequest) -> "Turn":
        async with transaction(deps.sessionmaker, caller.organization_id) as session:
            agent = await agents.get_agent(session, agent_id)
            agent_model = resolve_model(agent, deps.models, deps.settings)
            attached = await tools.agent_tools(session, agent_id)
            window = await messages.in_context(session, agent_id)
            run = await messages.start_run(session, agent_id)
        embedder = deps.embedders.for_handle(agent.embedding)
        custom = {tool.name: CustomTool.of(tool) for tool in attached if tool.tool_type == tools.CUSTOM_TOOL_TYPE}
        specs = [BUILTIN_SPECS[tool.name] if tool.name in BUILTIN_SPECS else custom[tool.name].spec for tool in attached]
        if agent.agent_type in HEARTBEAT_AGENT_TYPES:
            specs = [with_heartbeat(spec) for spec in specs]
        return cls(
            deps=deps,
            agent=agent,
            agent_model=agent_model,
            run_id=run.id,
            request=request,
            system_prompt=agent.compiled_system,
            tool_specs=specs,
            track=RuleTrack(ToolRules(agent.tool_rules), [spec.name for spec in specs]),
            history=to_chat_all(window),
            pending_inputs=request.input_messages(),
            custom_calls=CustomCalls(
                deps.sandbox,
                custom,
                env=agent.tool_secrets,
                network=wants_network(agent.metadata_),
                snapshot=lambda: agent_state(deps.sessionmaker, agent),
            ),
            embedding=EmbeddingModel.of(embedder),
        )

    async def events(self) -> AsyncGenerator[dict[str, Any], None]:
        """Letta messages as each step is stored, then stop_reason and usage_statistics, and an
        error_message when the turn failed. A cancelled turn (client gone) keeps its stored steps."""
        stop_reason, error = "max_steps", None
        try:
            for _ in range(self.request.max_steps):
                step_end = None
                async for event in self._step():
                    if isinstance(event, StepEnd):
                        step_end = event
                    else:
                        yield event
                if step_end is not None and step_end.stop_reason is not None:
                    stop_reason, error = step_end.stop_reason, step_end.error
                    break
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
            yield {
                "message_type": "error_message",
                "run_id": self.run_id,
                "error_type": stop_reason,
                "message": error,
                "detail": None,
            }

    async def _step(self) -> AsyncIterator[dict[str, Any] | StepEnd]:
        """One step: (compact if needed) → model → store. Yields token deltas, the stored step's
        Letta messages, and finally a StepEnd."""
        completion = None
        offered = set(self.track.offered())
        self.offered_specs = [spec for spec in self.tool_specs if spec.name in offered]
        try:
            await self._make_room()
            async for item in self._call_model(self._model_request()):
                if isinstance(item, Completion):
                    completion = item
                else:
                    yield item
        except ContextWindowExceeded as overflow:
            yield await self._after_overflow(overflow)
            return
        except LLMError as failure:
            yield StepEnd("llm_api_error", failure.message)
            return
        except CompactionError as failure:
            yield StepEnd("error", str(failure))
            return
        if completion is None:  # the ChatModel port promises one; a broken adapter fails the turn
            raise RuntimeError(f"the model stream of run {self.run_id} ended without a completion")
        completion = self.track.prefill(completion)
        estimated = self._estimate_prompt()
        self.usage.add(completion, estimated)
        self.last_prompt_tokens = completion.usage.prompt_tokens if completion.usage else estimated
        streamed = self.streamed_message_id
        vectors = await self._embed_tool_inputs(completion)
        sandboxed = await self.custom_calls.run(completion.tool_calls, frozenset(offered))
        shown, stop_reason = await self._store_step(completion, vectors, sandboxed)
        self.deps.embedding_wakeup.set()
        for message in shown:
            for letta in to_letta(
                message, agent_type=self.agent.agent_type, include_compaction=self.request.include_compaction_messages
            ):
                already_streamed = letta["id"] == streamed and letta["message_type"] == "assistant_message"
                if self._wanted(letta) and not already_streamed:
                    yield letta
        yield StepEnd(stop_reason)

    async def _call_model(self, request: ModelRequest) -> AsyncIterator[dict[str, Any] | Completion]:
        model = self.agent_model.model
        if not self.request.stream_tokens:
            yield await model.complete(request)
            return
        self.streamed_message_id = new_id("message")
        date = datetime.now(UTC).isoformat(timespec="seconds")
        async for item in model.stream(request):
            if isinstance(item, TextDelta):
                yield {
                    "id": self.streamed_message_id,
                    "date": date,
                    "message_type": "assistant_message",
                    "otid": f"{self.streamed_message_id}-0",
                    "run_id": self.run_id,
                    "content": item.text,
                }
            else:
                yield item

    def _model_request(self) -> ModelRequest:
        pending = [ChatMessage(message.role, message.text) for message in self.pending_inputs]
        tool_choice: Literal["auto", "required"] | None = None
        if self.offered_specs:
            tool_choice = "required" if self.agent.agent_type in HEARTBEAT_AGENT_TYPES else "auto"
        return ModelRequest(
            model=self.agent_model.name,
            messages=[ChatMessage("system", self.system_prompt), *self.history, *pending],
            tools=self.offered_specs,
            tool_choice=tool_choice,
        )

    def _estimate_prompt(self) -> int:
        request = self._model_request()
        return sum(estimate_message(m) for m in request.messages) + estimate_tools(list(request.tools))

    async def _make_room(self) -> None:
        """Compact before the call when the prompt would pass the trigger share of the window."""
        if over_budget(max(self._estimate_prompt(), self.last_prompt_tokens), self.agent_model.context_window):
            await self._compact(force=False)

    async def _compact(self, *, force: bool) -> None:
        fixed = estimate_text(self.system_prompt) + estimate_tools(self.tool_specs)
        if fixed >= self.agent_model.context_window:
            raise CompactionError(
                f"The system prompt and tools alone take about {fixed} tokens, more than the context window of "
                f"{self.agent_model.context_window}. Shorten memory blocks or raise the agent's context window."
            )
        await compact(self.deps.sessionmaker, self.agent.organization_id, self.agent.id, self.agent_model, force=force)
        async with transaction(self.deps.sessionmaker, self.agent.organization_id) as session:
            self.history = to_chat_all(await messages.in_context(session, self.agent.id))
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

    async def _embed_tool_inputs(self, completion: Completion) -> dict[str, Sequence[float]]:
        """Vectors for the texts this step's tool calls will search or store, computed now so no
        embedding call runs inside the step's transaction. On failure the tools report it."""
        texts = [text for call in completion.tool_calls if (text := _embedded_argument(call))]
        if not texts:
            return {}
        try:
            vectors = await self.deps.embedders.for_handle(self.agent.embedding).embed(texts)
        except LLMError as failure:
            log.warning("embedding tool inputs failed for agent %s: %s", self.agent.id, failure.message)
            return {}
        return dict(zip(texts, vectors, strict=True))

    async def _store_step(
        self, completion: Completion, vectors: dict[str, Sequence[float]], sandboxed: dict[str, ToolOutcome]
    ) -> tuple[list[Message], str | None]:
        """One transaction: inputs (first step), the assistant message, every tool call's effects
        and result, and the heartbeat that hands control back. Returns what the client is shown
        and the stop reason (None: take another step)."""
        step_id = new_id("step")
        base = {"agent_id": self.agent.id, "run_id": self.run_id, "step_id": step_id}
        async with transaction(self.deps.sessionmaker, self.agent.organization_id) as session:
            stored = [
                Message(id=new_id("message"), role=m.role, content=m.text, otid=m.otid, sender_id=m.sender_id, **base)
                for m in self.pending_inputs
            ]
            assistant = Message(
                id=self.streamed_message_id or new_id("message"),
                role="assistant",
                content=completion.content,
                reasoning=completion.reasoning,
                tool_calls=_calls_json(completion) or None,
                **base,
            )
            session.add_all([*stored, assistant])
            await session.flush()
            context = ToolContext(
                session,
                self.agent.id,
                Actor("agent", self.agent.id, step_id),
                message_id=assistant.id,
                run_id=self.run_id,
                timezone=self.agent.timezone,
                embedding=self.embedding,
                vectors=vectors,
                sandboxed=sandboxed,
            )
            results, outcomes = await self._run_tools(context, completion, base)
            shown = [assistant, *results]
            self.invalid_streak = self.invalid_streak + 1 if outcomes and all(o.invalid_call for o in outcomes) else 0
            self.track.record(completion, outcomes)
            decision = self.track.decide(self.agent.agent_type, completion, outcomes, self.invalid_streak)
            stop_reason = decision.stop_reason
            stored += shown
            if stop_reason is None and (decision.nudge or self.agent.agent_type in HEARTBEAT_AGENT_TYPES):
                why = decision.nudge or policy.heartbeat_reason(outcomes)
                reason = heartbeat_text(why, datetime.now(UTC).isoformat())
                stored.append(Message(id=new_id("message"), role="user", kind="heartbeat", content=reason, **base))
                session.add(stored[-1])
            await session.flush()
        self.streamed_message_id = None
        self.pending_inputs = []
        self.history.extend(to_chat(message) for message in stored)
        return shown, stop_reason

    async def _run_tools(
        self, context: ToolContext, completion: Completion, base: dict[str, str]
    ) -> tuple[list[Message], list[ToolOutcome]]:
        """Run the calls in order; their result messages (added to the step's transaction) and outcomes."""
        allowed = frozenset(spec.name for spec in self.offered_specs)
        results: list[Message] = []
        outcomes: list[ToolOutcome] = []
        for call in completion.tool_calls:
            outcome = await execute(context, call, allowed)
            outcomes.append(outcome)
            results.append(
                Message(
                    id=new_id("message"),
                    role="tool",
                    content=outcome.message,
                    tool_status=outcome.status,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    tool_stdout=outcome.stdout,
                    tool_stderr=outcome.stderr,
                    **base,
                )
            )
        context.session.add_all(results)
        return results, outcomes

    def _wanted(self, letta: dict[str, Any]) -> bool:
        wanted = self.request.include_return_message_types
        return wanted is None or letta["message_type"] in wanted

    async def _finish(self, stop_reason: str) -> None:
        async with transaction(self.deps.sessionmaker, self.agent.organization_id) as session:
            await messages.finish_run(session, self.run_id, stop_reason=stop_reason, usage=self.usage.as_letta(self.run_id))


def _embedded_argument(call: ToolCall) -> str | None:
    name = EMBEDDED_ARGUMENTS.get(call.name)
    try:
        value = json.loads(call.arguments or "{}").get(name) if name else None
    except (json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) and value.strip() else None


def _calls_json(completion: Completion) -> list[dict[str, str]]:
    return [{"id": call.id, "name": call.name, "arguments": call.arguments} for call in completion.tool_calls]
