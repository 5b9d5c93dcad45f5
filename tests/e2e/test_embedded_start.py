"""What `memvm serve` gets from the embedded PostgreSQL's start: a server that admits every connection
serve may open (each HTTP process's pools and LISTEN connections, and the embedding worker's pool:
docs/scale-out.md, "Connections per replica"), buffers sized to the host or as the operator says, and
the time of the start to import the app in."""

import time
from pathlib import Path

import asyncpg

from memvm.config import Settings
from memvm.db.database import resolve_database
from memvm.db.embedded import start_embedded_postgres
from memvm.db.postmaster import serving_pid, stop_serving_postmaster
from memvm.db.server_settings import MIB, host_memory_bytes, server_settings
from tests.support.pg import asyncpg_dsn

HTTP_PROCESSES = 3
START_TIMEOUT = 60.0


async def started_settings(settings: Settings) -> dict[str, int]:
    """max_connections and the memory settings (in MiB) of the embedded server `settings` start."""
    try:
        connection = await asyncpg.connect(**asyncpg_dsn(resolve_database(settings).url))
        try:
            row = await connection.fetchrow(
                "SELECT current_setting('max_connections')::int AS max_connections,"
                " pg_size_bytes(current_setting('shared_buffers')) / $1 AS shared_buffers,"
                " pg_size_bytes(current_setting('maintenance_work_mem')) / $1 AS maintenance_work_mem",
                MIB,
            )
        finally:
            await connection.close()
    finally:
        stop_serving_postmaster(settings.embedded_pg_dir)
    return dict(row)


async def test_the_embedded_server_admits_every_pool_of_serve_with_buffers_sized_to_the_host(data_dir: Path) -> None:
    settings = Settings(data_dir=data_dir, workers=HTTP_PROCESSES)
    pools = settings.db_pool_size + settings.db_max_overflow + settings.db_turn_lock_pool_size
    per_process = pools + 2 + 1  # two LISTEN connections, one for the background runs' claims
    started = await started_settings(settings)

    assert started["max_connections"] >= HTTP_PROCESSES * per_process + settings.db_pool_size + settings.db_max_overflow
    sized = server_settings(0, host_memory_bytes())
    assert f"{started['shared_buffers']}MB" == sized["shared_buffers"]
    assert f"{started['maintenance_work_mem']}MB" == sized["maintenance_work_mem"]


async def test_the_operator_sets_the_embedded_server_s_buffers(data_dir: Path) -> None:
    started = await started_settings(Settings(data_dir=data_dir, embedded_shared_buffers_mib=200))
    assert started["shared_buffers"] == 200


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
