"""`memvm serve`'s HTTP processes: one, or `MEMVM_WORKERS` (default: one per core) sharing the port.

Everything the processes must agree on already lives in PostgreSQL (turn locks, the otid, cancels,
revoked keys, the embedding queue), so each is a replica like any other. With several, this process
imports the app once, binds the port and forks them: the modules they run (most of a process's
memory) stay shared pages, and none pays for the imports again. It serves nothing itself, it only
replaces a process that dies and stops them all. Metrics are gathered across the processes, and
from the embedding worker, with prometheus-client's multi-process mode.
"""

import atexit
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from memvm.cli.head_limits import capped_protocol
from memvm.config import Settings
from memvm.db.database import DatabaseTarget
from memvm.processes import fork_child, import_deferred

log = logging.getLogger("memvm")

HTTP_PROCESS_NAME = "memvm-http"  # what ps and top show for each forked HTTP process
WATCH_SECONDS = 0.5  # how soon a dead HTTP process is replaced
STOP_GRACE_SECONDS = 30.0  # for the requests in flight, then SIGKILL


def share_metrics() -> None:
    """Every process of this server (the HTTP ones and the embedding worker) writes its metrics into
    one temporary directory, and GET /metrics sums them (prometheus-client's multi-process mode).
    Call it before any of them imports prometheus-client; a directory the operator set is kept."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        metrics_dir = tempfile.mkdtemp(prefix="memvm-metrics-")
        atexit.register(shutil.rmtree, metrics_dir, ignore_errors=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir


def load_app(settings: Settings, target: DatabaseTarget, *, forks: bool) -> uvicorn.Config:
    """The app, imported and built once in this process, before anything listens (after share_metrics
    when it `forks` processes, as the import brings prometheus-client)."""
    from memvm.main import create_app  # `memvm serve` imported it while its database started (serve.py)

    config = uvicorn.Config(
        create_app(settings, database=target, tools_synced=True),  # preflight stored them (serve.py)
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        http=capped_protocol(settings),
        ws="none",  # memvm serves no WebSocket: nor does it import uvicorn's (10 ms of a start)
    )
    if forks:
        import_deferred()  # before the forks, so that they share these too
    config.load()  # the middleware stack, built once: forked processes share it too
    return config


def serve(config: uvicorn.Config, processes: int, *, watch: Callable[[], None] | None = None) -> int:
    """Serve until SIGTERM or SIGINT, in this process or in `processes` forked ones; the exit status.
    With forked ones, `watch` is called as often as they are watched (the embedding worker's restart).
    Serving in this process, nothing calls it: a worker that ended stays ended, and the model it lent
    is loaded here."""
    if processes > 1:
        return _ForkedProcesses(config, config.bind_socket(), processes, watch or (lambda: None)).run()
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started else STARTUP_FAILURE


class _ForkedProcesses:
    """The HTTP processes, forked from this one with the app imported and the port bound. This process
    never runs an event loop or a thread of the app's, so each fork (a replacement too) starts clean."""

    def __init__(self, config: uvicorn.Config, listener: socket.socket, processes: int, watch: Callable[[], None]) -> None:
        self._config = config
        self._listener = listener
        self._processes = processes
        self._watch_more = watch
        self._pids: set[int] = set()

    def run(self) -> int:
        try:
            for _ in range(self._processes):
                self._fork()
            return self._watch()
        except (SystemExit, KeyboardInterrupt):  # SIGTERM (serve.py's handler) or SIGINT: stop
            return 0
        finally:
            self._stop()

    def _fork(self) -> None:
        # Each dies with this process (kill -9 included), as a single-process server would: none keeps
        # serving, or holding an agent's turn, alone.
        self._pids.add(fork_child(HTTP_PROCESS_NAME, signal.SIGKILL, self._serve_one))

    def _serve_one(self) -> int:
        uvicorn.Server(self._config).run(sockets=[self._listener])
        return 0

    def _watch(self) -> int:
        while True:
            time.sleep(WATCH_SECONDS)
            for pid, status in self._ended():
                if status == STARTUP_FAILURE:  # its log says why; every replacement would fail alike
                    print(f"memvm serve: HTTP process {pid} could not start (see above); stopping", file=sys.stderr)
                    return 1
                log.warning("HTTP process %d ended (exit status %d); starting another", pid, status)
                self._fork()
            self._watch_more()

    def _ended(self) -> list[tuple[int, int]]:
        ended = []
        for pid in sorted(self._pids):
            reaped, wait_status = os.waitpid(pid, os.WNOHANG)
            if reaped:
                self._pids.discard(pid)
                ended.append((pid, os.waitstatus_to_exitcode(wait_status)))
        return ended

    def _stop(self) -> None:
        """SIGTERM to every HTTP process (uvicorn's graceful shutdown), then SIGKILL after the grace.
        A second Ctrl-C or SIGTERM meanwhile goes on to them: uvicorn then stops at once."""
        handlers = {
            signum: signal.signal(signum, lambda received, frame: self._signal_all(received))
            for signum in (signal.SIGTERM, signal.SIGINT)
        }
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while self._pids and time.monotonic() < deadline:
            self._ended()
            time.sleep(0.05)
        self._signal_all(signal.SIGKILL)
        for pid in self._pids:
            os.waitpid(pid, 0)
        self._listener.close()
        for signum, handler in handlers.items():  # for the exit handlers that run next
            signal.signal(signum, handler)

    def _signal_all(self, signum: int) -> None:
        for pid in self._pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
