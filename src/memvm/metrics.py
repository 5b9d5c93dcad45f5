"""What an operator watches, in Prometheus' text format (GET /metrics). One place defines every
metric, so names and labels stay consistent; the code that does the work increments them.

Several worker processes: set PROMETHEUS_MULTIPROC_DIR (prometheus-client's multi-process mode)
and GET /metrics aggregates them."""

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_SLOW = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

HTTP_REQUESTS = Counter("memvm_http_requests_total", "HTTP requests by route template and status.", ["method", "route", "status"])
HTTP_SECONDS = Histogram(
    "memvm_http_request_seconds", "HTTP request latency by route template.", ["method", "route"], buckets=_FAST
)
TURNS = Counter("memvm_turns_total", "Finished turns (runs) by stop reason.", ["stop_reason"])
STEPS = Counter("memvm_steps_total", "Steps (model calls) by status.", ["status"])
MODEL_SECONDS = Histogram("memvm_model_call_seconds", "Latency of model calls by model handle.", ["model"], buckets=_SLOW)
MODEL_TOKENS = Counter("memvm_model_tokens_total", "Tokens by model handle and kind (prompt, completion).", ["model", "kind"])
TOOL_CALLS = Counter("memvm_tool_calls_total", "Tool calls by tool and status.", ["tool", "status"])
MCP_CALL_SECONDS = Histogram(
    "memvm_mcp_call_seconds", "MCP tools/call latency by outcome (success, error, unavailable).", ["outcome"], buckets=_SLOW
)
BLOCK_WRITES = Counter("memvm_block_writes_total", "Block writes by result (written, or why refused).", ["result"])
SEARCH_SECONDS = Histogram(
    "memvm_search_seconds", "Search latency by kind (archival, conversation, tools).", ["kind"], buckets=_FAST
)
TURN_LOCK_SECONDS = Histogram("memvm_turn_lock_wait_seconds", "Time a turn waited for its agent's lock.", buckets=_FAST)
EMBEDDED = Counter("memvm_embedding_queue_embedded_total", "Messages and tools the embedding queue embedded.")
EMBEDDING_LAG = Histogram("memvm_embedding_queue_lag_seconds", "From a message's or tool's storage to its vector.", buckets=_SLOW)
EMBEDDING_DEPTH = Gauge(
    "memvm_embedding_queue_depth", "Messages and tools without a vector (seen by this process's worker).", multiprocess_mode="max"
)
DB_POOL = Gauge(
    "memvm_db_pool_connections",
    "Database connections of the server's pools by state, summed over its live HTTP processes.",
    ["state"],
    multiprocess_mode="livesum",
)
# state → how many connections of this process's pool are in it.
_POOL_READERS: dict[str, Callable[[], int]] = {}


def _shared() -> bool:
    """Whether the processes of this server write their metrics into one directory (multi-process mode)."""
    return "PROMETHEUS_MULTIPROC_DIR" in os.environ


def watch_pool(checked_out: Callable[[], int], checked_in: Callable[[], int]) -> None:
    """The pool gauges are written before a scrape, not computed when scraped (set_function): in
    multi-process mode a scrape reads what each process last wrote, so there each request's end
    writes them too (after_request)."""
    _POOL_READERS.update(in_use=checked_out, idle=checked_in)


def _record_pool() -> None:
    for state, read in _POOL_READERS.items():
        DB_POOL.labels(state).set(read())


def after_request() -> None:
    if _shared():
        _record_pool()


def forget_this_process() -> None:
    """A stopping process's pool is no longer the server's (only `live…` gauges are dropped)."""
    if _shared():
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


@contextmanager
def timed(histogram: Histogram, *labels: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        (histogram.labels(*labels) if labels else histogram).observe(time.perf_counter() - started)


def exposition() -> tuple[bytes, str]:
    """The current values (every process's, in multi-process mode) and their content type."""
    _record_pool()
    if _shared():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
