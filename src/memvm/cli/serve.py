"""`memvm serve`: everything that can keep it from serving is checked before anything listens
(preflight.py); then the embedding worker's process starts (worker.py), and the HTTP processes
serve (http_processes.py)."""

import argparse
import atexit
import logging
import signal
import sys
from typing import TYPE_CHECKING

from memvm import __version__
from memvm.cli.options import Commands, settings_of
from memvm.config import Settings
from memvm.processes import configure_logging

if TYPE_CHECKING:
    from memvm.db.database import DatabaseTarget

log = logging.getLogger("memvm")


def add_commands(commands: Commands) -> None:
    serve = commands.add_parser("serve", help="run the HTTP server (embedded PostgreSQL unless MEMVM_DATABASE_URL is set)")
    serve.add_argument("--host", help="interface to listen on (default 127.0.0.1, or MEMVM_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8283, or MEMVM_PORT)")
    serve.add_argument(
        "--insecure",
        action="store_const",
        const=True,
        help="allow a non-loopback host without any API key (MEMVM_INSECURE); anyone who reaches it has full access",
    )
    serve.add_argument("--workers", type=int, help="HTTP processes sharing the port (default: one per core, or MEMVM_WORKERS)")
    serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> int:
    # Imported here so `memvm --help` and `memvm version` answer without loading the server.
    from memvm.cli import http_processes
    from memvm.cli.preflight import CannotServe

    # uvicorn re-raises the SIGTERM it caught after a graceful shutdown; with the default
    # handler that kills the process before atexit stops the embedded PostgreSQL.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    settings = settings_of(args)
    configure_logging(settings.log_level)
    try:
        target = _prepare_to_serve(settings)
    except CannotServe as error:
        print(f"memvm serve: {error}", file=sys.stderr)
        return 1
    settings = settings.model_copy(update={"migrate_on_start": False})  # done, once, above
    if settings.embedding_worker and settings.embedding_process:
        settings = _start_embedding_process(settings, target)
    http_processes.run(settings, target)
    return 0


def _prepare_to_serve(settings: Settings) -> "DatabaseTarget":
    """Everything that can keep the server from serving, before anything listens (preflight.py)."""
    from memvm.cli import http_processes, preflight

    preflight.check_port(settings)
    target = preflight.start_database(settings)
    log.info("memvm %s using %s, %d HTTP process(es)", __version__, target.description, http_processes.count(settings))
    if settings.ui:
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        log.info("operator console: http://%s:%d/ui/ (MEMVM_UI=false turns it off)", host, settings.port)
    preflight.prepare_database(target, settings)
    return target


def _start_embedding_process(settings: Settings, target: "DatabaseTarget") -> Settings:
    """`memvm worker` beside the server; the settings of the HTTP processes, which then embed nothing."""
    from memvm.cli.http_processes import share_metrics
    from memvm.cli.worker import start_worker_process, stop_worker_process

    share_metrics()  # the worker's metrics are the server's too
    worker = start_worker_process(target.url)
    atexit.register(stop_worker_process, worker)  # registered after the embedded server's stop: runs before it
    return settings.model_copy(update={"embedding_worker": False})


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)
