"""`memvm serve`'s HTTP processes: one, or `MEMVM_WORKERS` (default: one per core) sharing the port.

Everything the processes must agree on already lives in PostgreSQL (turn locks, the otid, cancels,
revoked keys, the embedding queue), so each is a replica like any other. The first process resolves
the database (starting the embedded server) and hands it to the others through the environment;
metrics are gathered across them, and from the embedding worker, with prometheus-client's
multi-process mode.
"""

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from memvm.cli.head_limits import capped_protocol
from memvm.config import Settings
from memvm.db.database import DatabaseTarget
from memvm.processes import configure_logging, end_with_parent

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def count(settings: Settings) -> int:
    return settings.workers or os.cpu_count() or 1


def share_metrics() -> None:
    """Every process of this server (the HTTP ones and the embedding worker) writes its metrics into
    one temporary directory, and GET /metrics sums them (prometheus-client's multi-process mode).
    Call it before any of them imports prometheus-client; a directory the operator set is kept."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        metrics_dir = tempfile.mkdtemp(prefix="memvm-metrics-")
        atexit.register(shutil.rmtree, metrics_dir, ignore_errors=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir


def run(settings: Settings, target: DatabaseTarget) -> None:
    processes = count(settings)
    if processes == 1:
        from memvm.main import create_app  # only here: with several processes, this one never serves

        uvicorn.run(
            create_app(settings, database=target),
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level,
            http=capped_protocol(settings),
        )
        return
    share_metrics()
    # uvicorn starts each process afresh (spawn): they read their settings from this environment.
    os.environ.update(
        {
            "MEMVM_DATABASE_URL": target.url,
            "MEMVM_HOST": settings.host,
            "MEMVM_PORT": str(settings.port),
            "MEMVM_INSECURE": str(settings.insecure).lower(),
            "MEMVM_EMBEDDING_WORKER": str(settings.embedding_worker).lower(),
            "MEMVM_MIGRATE_ON_START": str(settings.migrate_on_start).lower(),
        }
    )
    uvicorn.run(
        "memvm.cli.http_processes:process_app",
        factory=True,
        workers=processes,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        http=capped_protocol(settings),
    )


def process_app() -> ASGIApp:
    """The app of one HTTP process. It dies with the process that started it (kill -9 included),
    as a single-process server would: none keeps serving, or holding an agent's turn, alone."""
    end_with_parent(signal.SIGKILL)
    from memvm.main import create_app

    settings = Settings()
    configure_logging(settings.log_level)
    return create_app(settings)
