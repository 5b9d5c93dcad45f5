"""Which PostgreSQL memvm talks to: the configured URL, or the embedded server."""

import os
from dataclasses import dataclass
from pathlib import Path

from memvm.config import Settings
from memvm.db.embedded import start_embedded_postgres


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
    left by a crash does not count)."""
    try:
        pid = int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except PermissionError:
        return pid  # alive, owned by another user (the embedded server's own)
    except OSError:
        return None
    return pid


def resolve_database_url(settings: Settings) -> str:
    return resolve_database(settings).url
