"""Run and step shapes of the Letta v1 API (letta_client.types Run, Step, runs usage)."""

from datetime import datetime
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from memvm.orm import Run, Step
from memvm.runs.clock import ms_to_ns

Feedback = Literal["positive", "negative"]
RunStatus = Literal["created", "running", "completed", "failed", "cancelled"]
ACTIVE_STATUSES = frozenset({"created", "running"})
ALL_STATUSES = frozenset({*ACTIVE_STATUSES, "completed", "failed", "cancelled"})
# Letta's mapping of stop reasons to a finished run's status.
COMPLETED_STOPS = frozenset({"end_turn", "max_steps", "tool_rule", "requires_approval"})


def status_after(stop_reason: str) -> RunStatus:
    if stop_reason == "cancelled":
        return "cancelled"
    return "completed" if stop_reason in COMPLETED_STOPS else "failed"


class LastRun(NamedTuple):
    """How an agent's newest finished run ended (what its view and the console show)."""

    status: str
    stop_reason: str | None
    completed_at: datetime


class RunRead(BaseModel):
    id: str
    agent_id: str
    conversation_id: str | None = None
    status: RunStatus
    stop_reason: str | None
    background: bool
    request_config: dict[str, Any] | None
    metadata: dict[str, Any] | None = None
    created_at: datetime
    completed_at: datetime | None
    ttft_ns: int | None
    total_duration_ns: int | None
    callback_url: str | None = None
    callback_sent_at: datetime | None = None
    callback_status_code: int | None = None
    callback_error: str | None = None

    @classmethod
    def of(cls, run: Run) -> "RunRead":
        return cls(
            id=run.id,
            agent_id=run.agent_id,
            conversation_id=run.conversation_id,
            status=run.status,
            stop_reason=run.stop_reason,
            background=run.background,
            request_config=run.request_config,
            created_at=run.created_at,
            completed_at=run.completed_at,
            ttft_ns=run.ttft_ns,
            total_duration_ns=run.total_duration_ns,
            callback_url=run.callback_url,
            callback_sent_at=run.callback_sent_at,
            callback_status_code=run.callback_status_code,
            callback_error=run.callback_error,
        )


class RunUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class StepRead(BaseModel):
    id: str
    agent_id: str
    run_id: str
    model: str | None
    model_handle: str | None
    status: Literal["pending", "success", "failed", "cancelled"]
    stop_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    model_ms: float | None
    server_ms: float | None
    tool_calls: list[str]
    error_type: str | None
    error_data: dict[str, Any] | None
    feedback: Feedback | None = None
    tags: list[str] = []
    created_at: datetime

    @classmethod
    def of(cls, step: Step) -> "StepRead":
        return cls(
            id=step.id,
            agent_id=step.agent_id,
            run_id=step.run_id,
            model=step.model.split("/", 1)[-1] if step.model else None,
            model_handle=step.model,
            status=step.status,
            stop_reason=step.stop_reason,
            prompt_tokens=step.prompt_tokens,
            completion_tokens=step.completion_tokens,
            total_tokens=step.prompt_tokens + step.completion_tokens,
            model_ms=step.model_ms,
            server_ms=step.server_ms,
            tool_calls=step.tool_calls,
            error_type=step.error_type,
            error_data={"message": step.error} if step.error else None,
            feedback=step.feedback,
            tags=step.tags,
            created_at=step.created_at,
        )


class StepFeedback(BaseModel):
    """PATCH /v1/steps/{id}/feedback: `feedback` replaces the step's (null clears it); `tags`, when
    given and not empty, replace its tags (Letta's behaviour)."""

    model_config = ConfigDict(extra="forbid")

    feedback: Feedback | None = None
    tags: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(None, max_length=100)


class StepMetrics(BaseModel):
    """letta_client's StepMetrics, from what a step's row records: the model call's time, and the
    step's from the model call's start to its row. memvm does not time tool calls apart from the
    rest of the step, nor keep the wall-clock time of a start, so those fields are left out."""

    id: str
    agent_id: str
    run_id: str
    llm_request_ns: int | None
    step_ns: int | None

    @classmethod
    def of(cls, step: Step) -> "StepMetrics":
        timed = step.model_ms is not None and step.server_ms is not None
        return cls(
            id=step.id,
            agent_id=step.agent_id,
            run_id=step.run_id,
            llm_request_ns=ms_to_ns(step.model_ms),
            step_ns=ms_to_ns((step.model_ms or 0) + (step.server_ms or 0)) if timed else None,
        )
