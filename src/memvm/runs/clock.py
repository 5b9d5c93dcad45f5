"""A run's timings as Letta reports them: time to the first thing sent, and the whole duration."""

import time
from dataclasses import dataclass, field


@dataclass
class RunClock:
    started: float = field(default_factory=time.monotonic)
    first_event: float | None = None

    def saw_event(self) -> None:
        self.first_event = self.first_event or time.monotonic()

    def ttft_ns(self) -> int | None:
        return int((self.first_event - self.started) * 1e9) if self.first_event is not None else None

    def duration_ns(self) -> int:
        return int((time.monotonic() - self.started) * 1e9)


def ms_to_ns(ms: float | None) -> int | None:
    """A duration stored in milliseconds (a step's), in Letta's nanoseconds."""
    return None if ms is None else round(ms * 1_000_000)
