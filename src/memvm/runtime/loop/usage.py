"""Token usage of one turn, summed over its steps, in Letta's `usage_statistics` shape; and what
each step's row records."""

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memvm import metrics
from memvm.errors import DomainError
from memvm.ids import new_id
from memvm.llm.types import Completion, ToolCall
from memvm.orm import Step
from memvm.runtime.loop.tokens import estimate_text


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    step_count: int = 0
    context_tokens: int | None = None

    def add(self, completion: Completion, estimated_prompt: int) -> tuple[int, int]:
        """Count one model call; its (prompt, completion) tokens."""
        usage = completion.usage
        prompt = usage.prompt_tokens if usage else estimated_prompt
        completion_tokens = usage.completion_tokens if usage else estimate_text(completion.content)
        self.prompt_tokens += prompt
        self.completion_tokens += completion_tokens
        self.total_tokens += prompt + completion_tokens
        self.step_count += 1
        self.context_tokens = prompt + completion_tokens
        return prompt, completion_tokens

    def as_letta(self, run_id: str) -> dict[str, Any]:
        return {
            "message_type": "usage_statistics",
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "step_count": self.step_count,
            "context_tokens": self.context_tokens,
            "run_ids": [run_id],
        }


@dataclass
class StepMeter:
    """What one step's row records: the model call's tokens and time, and memvm's own time after it."""

    handle: str | None
    tokens: tuple[int, int] = (0, 0)
    model_started: float | None = None
    model_ended: float | None = None

    def model_ms(self) -> float | None:
        if self.model_started is None or self.model_ended is None:
            return None
        return (self.model_ended - self.model_started) * 1000

    def _count(self, status: str) -> None:
        metrics.STEPS.labels(status).inc()
        model = self.handle or "unknown"
        if (model_ms := self.model_ms()) is not None:
            metrics.MODEL_SECONDS.labels(model).observe(model_ms / 1000)
        metrics.MODEL_TOKENS.labels(model, "prompt").inc(self.tokens[0])
        metrics.MODEL_TOKENS.labels(model, "completion").inc(self.tokens[1])

    def failed(self, base: dict[str, str | None], failure: DomainError) -> Step:
        """The row of a model call that failed (no tokens, the provider's error)."""
        self.model_ended = time.monotonic()
        step = self.row(new_id("step"), base, calls=(), stop_reason="llm_api_error", status="failed")
        step.error_type, step.error = type(failure).__name__, failure.message
        return step

    def row(
        self,
        step_id: str,
        base: dict[str, str | None],
        *,
        calls: Sequence[ToolCall],
        stop_reason: str | None,
        status: str = "success",
    ) -> Step:
        server_ms = (time.monotonic() - self.model_ended) * 1000 if self.model_ended is not None else None
        self._count(status)
        return Step(
            id=step_id,
            agent_id=base["agent_id"],
            run_id=base["run_id"],
            conversation_id=base.get("conversation_id"),
            model=self.handle,
            status=status,
            stop_reason=stop_reason,
            prompt_tokens=self.tokens[0],
            completion_tokens=self.tokens[1],
            model_ms=self.model_ms(),
            server_ms=server_ms,
            tool_calls=[call.name for call in calls],
        )
