"""Writes migrations/head_schema.sql (src/memvm/db/head_schema.py says what it is for):
`python -m tests.support.head_schema`, after adding a migration. tests/db/test_head_schema.py fails
until the file is what this writes."""

import asyncio
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

from memvm.cli.backup import embedded_bin_dir
from memvm.db.embedded import start_embedded_postgres
from memvm.db.head_schema import HEADER
from memvm.db.migrate import HEAD_REVISION, HEAD_SCHEMA_FILE
from tests.support.pg import admin_execute, asyncpg_dsn, migrate_to, with_database

# Columns a seed row is written without: their values are the moment or the counter of the database
# that loads the script (a default of now(), clock_timestamp() or nextval()), or generated.
_COLUMNS = """
SELECT column_name FROM information_schema.columns
WHERE table_schema = 'public' AND table_name = $1 AND is_generated = 'NEVER'
  AND coalesce(column_default, '') !~ '(now|clock_timestamp|nextval)\\('
ORDER BY ordinal_position
"""
_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname
"""


def _pg_dump(url: str, *options: str) -> str:
    """pg_dump's plain SQL of the database at `url` (the embedded server's pg_dump, as `memvm backup`)."""
    dsn = asyncpg_dsn(url)
    port = str(make_url(url).port or 5432)
    command = [str(embedded_bin_dir() / "pg_dump"), "-h", dsn["host"], "-p", port, "-U", dsn["user"], "-d", dsn["database"]]
    command += ["--no-owner", "--no-privileges", *options]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


async def seed_rows(url: str) -> list[str]:
    """The rows the migrations wrote, as INSERT statements, table by table in name order."""
    db = await asyncpg.connect(**asyncpg_dsn(url))
    try:
        statements = []
        for table in [row["relname"] for row in await db.fetch(_TABLES)]:
            columns = [row["column_name"] for row in await db.fetch(_COLUMNS, table)]
            values = ", ".join(f"quote_nullable({column})" for column in columns)
            for row in await db.fetch(f"SELECT {values} FROM public.{table} ORDER BY {', '.join(columns)}"):
                statements.append(f"INSERT INTO public.{table} ({', '.join(columns)}) VALUES ({', '.join(row)});")
        return statements
    finally:
        await db.close()


def _script_lines(dump: str) -> list[str]:
    """pg_dump's script as lines of statements for one transaction: its comments and psql commands left out,
    its session settings made the transaction's own (the connection goes back to a pool)."""
    lines = []
    for line in dump.splitlines():
        if not line or line.startswith(("--", "\\")):
            continue
        if line.startswith("SET "):
            line = "SET LOCAL " + line.removeprefix("SET ")
        lines.append(line.replace("set_config('search_path', '', false)", "set_config('search_path', '', true)"))
    return lines


async def head_schema_of(url: str) -> str:
    """The script for the database at `url`, which the migrations brought to head: its tables, the
    rows, then its indexes and constraints (pg_dump's own order, so rows go in before their checks)."""
    db = await asyncpg.connect(**asyncpg_dsn(url))
    try:
        major = await db.fetchval("SELECT current_setting('server_version_num')::int / 10000")
    finally:
        await db.close()
    header = HEADER.format(revision=HEAD_REVISION, major=major)
    tables = _script_lines(_pg_dump(url, "--section=pre-data"))
    checks = _script_lines(_pg_dump(url, "--section=post-data"))
    return "\n".join([header, *tables, *await seed_rows(url), *checks]) + "\n"


async def migrated_head_schema(server_url: str) -> str:
    """The script as the migrations make it today, from scratch databases of the server. PostgreSQL
    parses some CHECK constraints of a dump into another tree than the migrations' own (an IN list over
    a varchar column: casts inside the array instead of around it), so the script is dumped again from
    a database it was loaded into: that dump loads into itself."""
    migrated = await _in_scratch_database(server_url, "memvm_head_schema_migrated", lambda url: migrate_to(url, "head"))
    return await _in_scratch_database(server_url, "memvm_head_schema_loaded", lambda url: load_script(url, migrated))


async def load_script(url: str, script: str) -> None:
    db = await asyncpg.connect(**asyncpg_dsn(url))
    try:
        async with db.transaction():
            await db.execute(script)
    finally:
        await db.close()


async def _in_scratch_database(server_url: str, name: str, fill: Callable[[str], Awaitable[None]]) -> str:
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    try:
        url = with_database(server_url, name)
        await fill(url)
        return await head_schema_of(url)
    finally:
        await admin_execute(server_url, f"DROP DATABASE {name} WITH (FORCE)")


def main() -> int:
    server_url = start_embedded_postgres(Path(tempfile.mkdtemp(prefix="memvm-head-schema-")), keep_data=False)
    HEAD_SCHEMA_FILE.write_text(asyncio.run(migrated_head_schema(server_url)), encoding="utf-8")
    print(f"wrote {HEAD_SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
