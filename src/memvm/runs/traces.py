"""A run's trace: spans built from what the run and its steps record, named and shaped as the
OpenTelemetry rows Letta's trace viewer reads (`SpanName`, `SpanId`, `ParentSpanId`, `Timestamp`,
`Duration` in nanoseconds, `StatusCode`, `SpanAttributes`).

What is recorded, and so what the spans hold: the run's start, total duration and time to first
token; each step's model call (its time, model, tokens), memvm's own time after it (tool calls and
storing, together), the names of the tools it called and its error. Tool calls and database time are
not timed apart, so they are attributes of their step, not spans of their own. A step's start is its
stored end less its measured time."""

from datetime import datetime, timedelta
from typing import Any

from memvm.orm import Run, Step
from memvm.runs.clock import ms_to_ns

_RUN_STATUS_CODES = {"completed": "Ok", "failed": "Error", "cancelled": "Error"}


def run_trace(run: Run, steps: list[Step], limit: int) -> list[dict[str, Any]]:
    """The run's spans, oldest first: the run, its time to first token, then each step with its model call."""
    spans = [_run_span(run)]
    if run.ttft_ns is not None:
        spans.append(_span(run, f"{run.id}:ttft", run.id, "time_to_first_token", run.created_at, run.ttft_ns, "Ok", {}))
    for step in steps:
        spans.extend(_step_spans(run, step))
    return spans[:limit]


def _run_span(run: Run) -> dict[str, Any]:
    usage = run.usage or {}
    attributes = {
        "agent_id": run.agent_id,
        "conversation_id": run.conversation_id,
        "status": run.status,
        "stop_reason": run.stop_reason,
        "background": run.background,
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
    }
    status = _RUN_STATUS_CODES.get(run.status, "Unset")
    return _span(run, run.id, "", "run", run.created_at, run.total_duration_ns, status, attributes)


def _step_spans(run: Run, step: Step) -> list[dict[str, Any]]:
    step_ms = (step.model_ms or 0) + (step.server_ms or 0)
    start = step.created_at - timedelta(milliseconds=step_ms)
    timed = step.model_ms is not None or step.server_ms is not None
    attributes = {
        "model": step.model,
        "status": step.status,
        "stop_reason": step.stop_reason,
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "tool_calls": step.tool_calls,
        "server_ns": ms_to_ns(step.server_ms),
        "error_type": step.error_type,
        "error": step.error,
    }
    status = "Ok" if step.status == "success" else "Error"
    spans = [_span(run, step.id, run.id, "agent_step", start, ms_to_ns(step_ms) if timed else None, status, attributes)]
    if step.model_ms is not None:
        call = {"model": step.model, "prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens}
        spans.append(_span(run, f"{step.id}:llm", step.id, "llm_request", start, ms_to_ns(step.model_ms), status, call))
    return spans


def _span(
    run: Run,
    span_id: str,
    parent_id: str,
    name: str,
    start: datetime,
    duration_ns: int | None,
    status: str,
    attributes: dict[str, Any],
) -> dict[str, Any]:
    return {
        "TraceId": run.id,
        "SpanId": span_id,
        "ParentSpanId": parent_id,
        "SpanName": name,
        "Timestamp": start.isoformat(),
        "Duration": duration_ns,
        "StatusCode": status,
        "SpanAttributes": attributes,
    }
