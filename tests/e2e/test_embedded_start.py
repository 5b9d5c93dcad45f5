"""What `memvm serve` gets from the embedded PostgreSQL's start: a server that admits every connection
serve may open (each HTTP process's pools and LISTEN connections, and the embedding worker's pool:
docs/scale-out.md, "Connections per replica"), and the time of the start to import the app in."""

import time
from pathlib import Path

import asyncpg

from memvm.config import Settings
from memvm.db.database import resolve_database
from memvm.db.embedded import start_embedded_postgres
from memvm.db.postmaster import serving_pid, stop_serving_postmaster
from tests.support.pg import asyncpg_dsn

HTTP_PROCESSES = 3
START_TIMEOUT = 60.0


async def max_connections(url: str) -> int:
    connection = await asyncpg.connect(**asyncpg_dsn(url))
    try:
        return int(await connection.fetchval("SHOW max_connections"))
    finally:
        await connection.close()


async def test_the_embedded_server_admits_every_pool_of_serve(data_dir: Path) -> None:
    settings = Settings(data_dir=data_dir, workers=HTTP_PROCESSES)
    pools = settings.db_pool_size + settings.db_max_overflow + settings.db_turn_lock_pool_size
    per_process = pools + 2 + 1  # two LISTEN connections, one for the background runs' claims
    try:
        admitted = await max_connections(resolve_database(settings).url)
    finally:
        stop_serving_postmaster(settings.embedded_pg_dir)

    assert admitted >= HTTP_PROCESSES * per_process + settings.db_pool_size + settings.db_max_overflow


def test_the_caller_goes_on_while_the_server_starts(data_dir: Path) -> None:
    """`meanwhile` (serve's imports) runs while the postmaster starts, not before or after it."""
    pg_dir = data_dir / "pg"
    seen: list[int | None] = []

    def meanwhile() -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while serving_pid(pg_dir) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(serving_pid(pg_dir))

    try:
        start_embedded_postgres(pg_dir, meanwhile=meanwhile)
    finally:
        stop_serving_postmaster(pg_dir)

    assert len(seen) == 1 and seen[0] is not None
