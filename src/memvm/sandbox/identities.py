"""Who a sandboxed call runs as, which decides what its process limit counts.

Linux counts RLIMIT_NPROC per real uid, and never limits root. So a server running as root gives
each concurrent call its own unprivileged uid from a fixed range (no account needed): the limit
then counts that call's processes alone, and calls cannot signal each other. A server running as
an ordinary user cannot switch uid; its calls share its uid, so each call's limit is what that uid
already runs plus the per-call allowance."""

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Identity:
    uid: int | None  # None: the server's own
    allowance: int

    def switch(self, setpriv: str | None) -> list[str]:
        """The command prefix that becomes this identity and drops every capability (a command, not
        spawn options: as root it runs inside the jail, after bubblewrap)."""
        if self.uid is None:
            return []
        if setpriv is None:  # never run a call as root: the launchers are found before any call
            raise RuntimeError("setpriv is needed to run a call as its own uid")
        ids = [f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        return [setpriv, *ids, "--inh-caps=-all", "--bounding-set=-all", "--"]

    def processes(self) -> int:
        if self.uid is not None:
            return self.allowance
        return _tasks_of(os.getuid()) + self.allowance


class Identities:
    """Leases identities; at most `concurrency` calls run at once either way."""

    def __init__(self, first_uid: int, concurrency: int, allowance: int) -> None:
        self._allowance = allowance
        self._free: asyncio.Queue[int | None] = asyncio.Queue()
        for slot in range(concurrency):
            self._free.put_nowait(first_uid + slot if os.geteuid() == 0 else None)

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[Identity]:
        uid = await self._free.get()
        try:
            yield Identity(uid, self._allowance)
        finally:
            self._free.put_nowait(uid)


def _tasks_of(uid: int) -> int:
    """Threads count against RLIMIT_NPROC as processes do."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += sum(1 for _ in (entry / "task").iterdir())
            except OSError:  # it ended while we looked
                continue
    return count
