"""Which PostgreSQL memvm talks to: the configured URL, or the embedded server."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memvm.config import Settings
from memvm.db.embedded import POSTGRES_MAX_CONNECTIONS, start_embedded_postgres
from memvm.db.postmaster import serving_pid


@dataclass(frozen=True)
class DatabaseTarget:
    url: str
    description: str  # for the first log line: which server, without credentials


def resolve_database(settings: Settings, meanwhile: Callable[[], None] | None = None) -> DatabaseTarget:
    """The server to use; `meanwhile` (if given) runs while the embedded one starts, or at once."""
    if settings.database_url:
        if meanwhile is not None:
            meanwhile()
        where = settings.database_url.split("@", 1)[-1]
        return DatabaseTarget(settings.database_url, f"external PostgreSQL at {where}")
    pg_dir = settings.embedded_pg_dir
    url = start_embedded_postgres(
        pg_dir,
        max_connections=embedded_max_connections(settings),
        shared_buffers_mib=settings.embedded_shared_buffers_mib,
        meanwhile=meanwhile,
    )
    return DatabaseTarget(url, f"embedded PostgreSQL in {pg_dir}")


# The other `memvm` commands (keys, backup's pg_dump, db upgrade) and an operator's psql, beside a server.
COMMAND_CONNECTIONS = 10


def embedded_max_connections(settings: Settings) -> int:
    """What the embedded server admits: `memvm serve` with these settings at full use of every pool,
    and the commands beside it (whichever of them starts the server, it starts it alike)."""
    return max(POSTGRES_MAX_CONNECTIONS, settings.serve_connections + COMMAND_CONNECTIONS)


def embedded_server_pid(pg_dir: Path) -> int | None:
    """The pid of a PostgreSQL server running on this data directory, if one is (a stale pid file
    left by a crash, or one naming a zombie, does not count)."""
    return serving_pid(pg_dir)


def resolve_database_url(settings: Settings) -> str:
    return resolve_database(settings).url
