"""Which PostgreSQL memvm talks to: the configured URL, or the embedded server."""

from dataclasses import dataclass
from pathlib import Path

from memvm.config import Settings
from memvm.db.embedded import start_embedded_postgres
from memvm.db.postmaster import serving_pid


@dataclass(frozen=True)
class DatabaseTarget:
    url: str
    description: str  # for the first log line: which server, without credentials


def resolve_database(settings: Settings) -> DatabaseTarget:
    if settings.database_url:
        where = settings.database_url.split("@", 1)[-1]
        return DatabaseTarget(settings.database_url, f"external PostgreSQL at {where}")
    pg_dir = settings.embedded_pg_dir
    return DatabaseTarget(start_embedded_postgres(pg_dir), f"embedded PostgreSQL in {pg_dir}")


def embedded_server_pid(pg_dir: Path) -> int | None:
    """The pid of a PostgreSQL server running on this data directory, if one is (a stale pid file
    left by a crash, or one naming a zombie, does not count)."""
    return serving_pid(pg_dir)


def resolve_database_url(settings: Settings) -> str:
    return resolve_database(settings).url
