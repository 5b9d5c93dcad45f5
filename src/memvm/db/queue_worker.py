"""The loop of a background worker that drains a queue table (embeddings, files to parse), and the
turns organizations take in it."""

import asyncio
import bisect
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from memvm.db.engine import database_unreachable

log = logging.getLogger(__name__)


class Rotation:
    """The order in which a worker serves the organizations with rows waiting in a queue (it claims
    one organization's rows at a time: under Citus, FOR UPDATE must stay in one shard). Each batch
    starts with the organization after the one the previous batch started with, and the next ones
    fill what it leaves: of N organizations with rows waiting, each starts a batch once in N, so a
    large backlog no longer keeps the others' rows waiting until it is drained."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}  # per queue, the organization its last batch started with

    def order(self, queue: str, organizations: Iterable[str]) -> list[str]:
        """The organizations in this batch's order, and the next batch starts one further."""
        ordered = sorted(organizations)
        previous = self._first.get(queue)
        start = 0 if previous is None else bisect.bisect_right(ordered, previous)
        ordered = ordered[start:] + ordered[:start]
        if ordered:
            self._first[queue] = ordered[0]
        return ordered


class QueueWorker:
    """A queue's consumer in this replica. It runs `drain` (one batch; returns how many rows it
    took, 0 when the queue is empty) until the queue is empty, then sleeps until woken (this process
    queued something) or `poll_seconds` pass (rows queued by another replica, or left behind by a
    crash). `stop` lets the batch in progress finish: cut off, its rows would wait for their claim
    to expire."""

    def __init__(self, name: str, drain: Callable[[], Awaitable[int]], wakeup: asyncio.Event, *, poll_seconds: float) -> None:
        self._name = name
        self._drain = drain
        self._wakeup = wakeup
        self._poll_seconds = poll_seconds
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Finish the batch in progress (at most `grace_seconds`), then end."""
        if self._task is None:
            return
        self._stopping = True
        self._wakeup.set()
        done, _ = await asyncio.wait({self._task}, timeout=grace_seconds)
        if not done:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while not self._stopping:
            # Cleared before the batch, not after: a wakeup while it runs (rows queued too late for
            # it) must end the wait that follows an empty batch.
            self._wakeup.clear()
            try:
                claimed = await self._drain()
            except Exception as error:
                if database_unreachable(error):  # an outage: one line per poll, not a traceback each
                    log.warning("%s: the database is unreachable (%s); retrying later", self._name, error.__class__.__name__)
                else:
                    log.exception("%s failed; retrying later", self._name)
                claimed = 0
            if claimed or self._stopping:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._poll_seconds)
