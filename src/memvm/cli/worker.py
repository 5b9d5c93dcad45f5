"""`memvm worker`: the embedding queue's consumer, and the file worker that reads uploaded files
into chunks for it, as a process of its own.

`memvm serve` forks one beside its HTTP processes by default (MEMVM_EMBEDDING_PROCESS), so embedding
the turns' messages never shares the server's event loop or its CPU priority: the worker runs niced,
and a request never waits for it. Scaled out, replicas may run with MEMVM_EMBEDDING_WORKER=false and
one or more `memvm worker` processes alone against MEMVM_DATABASE_URL; they share the queue (rows
are claimed with SKIP LOCKED). The queue itself is in `search/embedding_queue.py`.

The worker `memvm serve` forks also lends its model to the HTTP processes, over a Unix socket
(embeddings/model_socket.py): the model is loaded in this process only. The server forks another
worker if it ends. A `memvm worker` alone lends nothing.
"""

import argparse
import asyncio
import atexit
import contextlib
import logging
import os
import shutil
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from memvm.cli.database import embedded_database_held
from memvm.cli.options import Commands, settings_of
from memvm.config import Settings
from memvm.processes import configure_logging, fork_child

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger("memvm.worker")

NICENESS = 10  # below the server's requests, above nothing else on the box
STOP_GRACE_SECONDS = 15.0
RESTART_SECONDS = 5.0  # a worker that keeps ending is started again at most this often


def add_commands(commands: Commands) -> None:
    worker = commands.add_parser(
        "worker",
        help="embed stored messages and read uploaded files in the background, alone "
        "(`memvm serve` starts one itself by default)",
    )
    worker.set_defaults(run=_worker_command)


def _worker_command(args: argparse.Namespace) -> int:
    from memvm.db.database import resolve_database

    settings = settings_of(args)
    configure_logging(settings.log_level)
    advice = "`memvm serve` runs its own embedding worker (MEMVM_EMBEDDING_PROCESS); one alone needs MEMVM_DATABASE_URL."
    if embedded_database_held(settings, advice):
        return 1
    return serve_worker(resolve_database(settings).url, settings)


async def run_worker(database_url: str, settings: Settings, stop: asyncio.Event, model_socket: Path | None = None) -> None:
    """Once the schema is migrated, drain the queues until `stop` is set; the batch (or file) in
    progress is finished first. From the start, lend the local model on `model_socket` if given."""
    # Imported here: every `memvm` command imports this module (for its subcommand), and `memvm --help`
    # should not load the database stack. The worker `memvm serve` forks has them already.
    from memvm.db.engine import build_engine, build_sessionmaker
    from memvm.embeddings.local import shared_local_embedder
    from memvm.embeddings.model_socket import ModelServer
    from memvm.embeddings.registry import EmbedderRegistry
    from memvm.files.processing import FileWorker
    from memvm.search.embedding_queue import EmbeddingWorker

    engine = build_engine(database_url, settings)
    sessionmaker, embedders = build_sessionmaker(engine), EmbedderRegistry.from_settings(settings)
    # No in-process wakeup reaches another process: an idle worker polls its queue. The file worker
    # wakes the embedding worker when it has stored a file's chunks.
    poll_seconds, embedding_wakeup = settings.embedding_poll_seconds, asyncio.Event()
    embedding = EmbeddingWorker(sessionmaker, embedders, embedding_wakeup, poll_seconds=poll_seconds)
    files = FileWorker(sessionmaker, asyncio.Event(), embedding_wakeup=embedding_wakeup, poll_seconds=poll_seconds)
    lending = ModelServer(model_socket, shared_local_embedder()) if model_socket is not None else None
    try:
        if lending is not None:
            await lending.start()
        if await _schema_migrated(engine, stop, poll_seconds):
            embedding.start()
            files.start()
            await stop.wait()
    finally:
        if lending is not None:
            await lending.close()
        await files.stop()
        await embedding.stop()
        await embedders.aclose()
        await engine.dispose()


async def _schema_migrated(engine: "AsyncEngine", stop: asyncio.Event, poll_seconds: float) -> bool:
    """Wait until the schema is at this code's revision (a worker may start before whatever migrates
    a new database: the server, or `memvm db upgrade`); False if stopped first."""
    from memvm.db.engine import database_unreachable
    from memvm.db.migrate import migration_plan

    said = False
    while not stop.is_set():
        try:
            plan = await migration_plan(engine)
        except Exception as error:
            if not database_unreachable(error):
                raise
            state = "the database is unreachable"
        else:
            if plan.up_to_date:
                if said:
                    log.info("the database schema is at %s now; embedding", plan.target)
                return True
            state = f"it is at {plan.current or 'no revision yet'}, this worker needs {plan.target}"
        if not said:
            log.info("waiting for the database schema (%s); `memvm serve` or `memvm db upgrade` migrates it", state)
            said = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), poll_seconds)
    return False


def serve_worker(database_url: str, settings: Settings, model_socket: Path | None = None) -> int:
    """The `memvm worker` process: lower CPU priority, ends on SIGTERM or SIGINT. The queries it
    answers on `model_socket` run niced too (a query is a few ms of CPU)."""
    _lower_priority()

    async def until_signalled() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        log.info("embedding worker running (pid %d, niceness %d)", os.getpid(), os.nice(0))
        await run_worker(database_url, settings, stop, model_socket)

    asyncio.run(until_signalled())
    return 0


WORKER_PROCESS_NAME = "memvm-worker"  # what ps and top show for `memvm serve`'s worker


def model_socket_path() -> Path | None:
    """Where `memvm serve`'s worker will lend its model, in a directory removed when this process ends."""
    from memvm.embeddings.model_socket import new_socket_path

    path = new_socket_path()
    if path is not None:
        atexit.register(shutil.rmtree, path.parent, ignore_errors=True)
    return path


class WorkerProcess:
    """The worker forked from `memvm serve` once it has imported the app: it shares those modules
    instead of importing them again. It gets SIGTERM if the server dies without stopping it (kill -9
    included)."""

    def __init__(self, database_url: str, settings: Settings, model_socket: Path | None) -> None:
        self._body = lambda: serve_worker(database_url, settings, model_socket)
        self._started = time.monotonic()
        self.pid = fork_child(WORKER_PROCESS_NAME, signal.SIGTERM, self._body)

    def replace_if_ended(self) -> None:
        """Fork another worker if this one ended (at most every RESTART_SECONDS). Only from a process
        that runs no event loop or thread (a fork must start clean): the supervisor of several HTTP
        processes."""
        if self.pid and os.waitpid(self.pid, os.WNOHANG)[0]:
            log.warning("the embedding worker (pid %d) ended; starting another", self.pid)
            self.pid = 0
        if not self.pid and time.monotonic() - self._started >= RESTART_SECONDS:
            self._started = time.monotonic()
            self.pid = fork_child(WORKER_PROCESS_NAME, signal.SIGTERM, self._body)

    def stop(self) -> None:
        if self.pid:
            stop_worker_process(self.pid)


def stop_worker_process(pid: int) -> None:
    """SIGTERM, then SIGKILL if the batch in progress takes longer than STOP_GRACE_SECONDS."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return
        time.sleep(0.05)


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(max(0, NICENESS - os.nice(0)))
