"""`memvm serve`: everything that can keep it from serving is checked before anything listens
(preflight.py); then it imports the app once and forks the embedding worker (worker.py) and, when
there are several, the HTTP processes (http_processes.py), which share its modules' memory."""

import argparse
import atexit
import logging
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from memvm import __version__
from memvm.cli.options import Commands, settings_of
from memvm.config import Settings
from memvm.processes import configure_logging, skip_unused_extras, starting_without_collection

if TYPE_CHECKING:
    from pathlib import Path

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
    skip_unused_extras()  # before preflight's imports bring alembic, and the app's httpx
    # Imported here so `memvm --help` and `memvm version` answer without loading the server.
    from memvm.cli.preflight import CannotServe

    # uvicorn re-raises the SIGTERM it caught after a graceful shutdown; with the default
    # handler that kills the process before atexit stops the embedded PostgreSQL.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    settings = settings_of(args)
    configure_logging(settings.log_level)
    try:
        with starting_without_collection():  # the app's import, while the embedded PostgreSQL starts
            target = _prepare_to_serve(settings)
    except CannotServe as error:
        print(f"memvm serve: {error}", file=sys.stderr)
        return 1
    return _run(settings.model_copy(update={"migrate_on_start": False}), target)  # migrated, once, above


def _run(settings: Settings, target: "DatabaseTarget") -> int:
    """Import the app once, fork the embedding worker and the HTTP processes from this process (they
    share its modules), and serve; the exit status."""
    from memvm.cli import http_processes
    from memvm.cli.worker import model_socket_path

    worker = settings.embedding_worker and settings.embedding_process
    forks = _forks(settings)
    if forks:
        http_processes.share_metrics()  # before the app's import brings prometheus-client
    # With a worker process, the HTTP processes embed nothing of the queue's, and borrow its model.
    model_socket = model_socket_path() if worker else None
    http_settings = settings.model_copy(update={"embedding_worker": False}) if worker else settings
    app = http_processes.load_app(http_settings.with_model_socket(model_socket), target, forks=forks)
    watch = _start_embedding_process(settings, target, model_socket) if worker else None
    return http_processes.serve(app, settings.http_processes, watch=watch)


def _prepare_to_serve(settings: Settings) -> "DatabaseTarget":
    """Everything that can keep the server from serving, before anything listens (preflight.py)."""
    from memvm.cli import preflight

    preflight.check_port(settings)
    # The app's modules load while the embedded PostgreSQL starts: a start is mostly a wait for it.
    target = preflight.start_database(settings, meanwhile=lambda: _import_app(settings))
    log.info("memvm %s using %s, %d HTTP process(es)", __version__, target.description, settings.http_processes)
    if settings.ui:
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        log.info("operator console: http://%s:%d/ui/ (MEMVM_UI=false turns it off)", host, settings.port)
    preflight.prepare_database(target, settings)
    return target


def _forks(settings: Settings) -> bool:
    """Whether this process forks others: the embedding worker, or several HTTP processes."""
    return (settings.embedding_worker and settings.embedding_process) or settings.http_processes > 1


def _import_app(settings: Settings) -> None:
    """What load_app imports, ahead of it: when this process forks, after share_metrics (the app's
    import brings prometheus-client) and with the deferred modules, which the forks then share."""
    from memvm.cli import http_processes
    from memvm.processes import import_deferred

    if _forks(settings):
        http_processes.share_metrics()
        import_deferred()
    import memvm.main  # noqa: F401


def _start_embedding_process(settings: Settings, target: "DatabaseTarget", model_socket: "Path | None") -> Callable[[], None]:
    """`memvm worker` beside the HTTP processes, forked before anything runs an event loop here; what
    replaces it when it ends."""
    from memvm.cli.worker import WorkerProcess

    worker = WorkerProcess(target.url, settings, model_socket)
    atexit.register(worker.stop)  # registered after the embedded server's stop: runs before it
    return worker.replace_if_ended


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)
