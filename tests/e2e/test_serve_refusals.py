"""`memvm serve` that cannot serve: it exits with status 1 after one line on stderr that says why and
what to do, without a traceback, and before anything binds the port (uvicorn says when it binds or
starts a process; none of its lines may appear), in one HTTP process or several."""

import socket
import subprocess
from pathlib import Path

import asyncpg
import pytest

from tests.support.pg import admin_execute, asyncpg_dsn, with_database
from tests.support.serve import child_env, free_port, memvm

UVICORN_STARTED = ("Uvicorn running on", "Started parent process", "Started server process", "Waiting for application startup")


def assert_refused(result: subprocess.CompletedProcess[str], *cause: str) -> None:
    output = result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("memvm serve: ")]
    assert result.returncode == 1, output
    assert len(said) == 1, output
    assert all(part in said[0] for part in cause), output
    assert "Traceback" not in output and "ERROR" not in output, output
    assert not [mark for mark in UVICORN_STARTED if mark in output], output


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_open_address_without_keys_is_refused_before_the_port_is_bound(database_url: str, workers: str) -> None:
    env = child_env(MEMVM_DATABASE_URL=database_url, MEMVM_WORKERS=workers)

    refused = memvm(env, "serve", "--host", "0.0.0.0", "--port", str(free_port()))

    assert_refused(refused, "Refusing to listen on 0.0.0.0 without authentication", "MEMVM_ADMIN_API_KEY", "--insecure")


def test_an_unreachable_database_is_refused_in_one_line() -> None:
    nobody_listens = f"postgresql+asyncpg://memvm@127.0.0.1:{free_port()}/memvm"
    env = child_env(MEMVM_DATABASE_URL=nobody_listens, MEMVM_WORKERS="2")

    refused = memvm(env, "serve", "--port", str(free_port()))

    assert_refused(refused, "cannot connect to the external PostgreSQL at 127.0.0.1", "ConnectionRefusedError", "DATABASE_URL")


async def test_a_database_it_cannot_migrate_is_refused_in_one_line(server_url: str) -> None:
    name = "e2e_unknown_revision"
    await admin_execute(server_url, f"DROP DATABASE IF EXISTS {name}")
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    url = with_database(server_url, name)
    connection = await asyncpg.connect(**asyncpg_dsn(url))
    try:  # as a newer memvm would leave it
        await connection.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
        await connection.execute("INSERT INTO alembic_version VALUES ('ffffffffffff')")
    finally:
        await connection.close()

    refused = memvm(child_env(MEMVM_DATABASE_URL=url), "serve", "--port", str(free_port()))

    assert_refused(refused, "migrating the external PostgreSQL", "ffffffffffff", "newer memvm")


def test_a_port_in_use_is_refused_before_the_database_starts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        refused = memvm(child_env(MEMVM_DATA_DIR=str(data_dir)), "serve", "--port", str(port))

    assert_refused(refused, f"cannot listen on 127.0.0.1:{port}", "Address already in use", "--port")
    assert not data_dir.exists()  # refused before starting (and creating) the embedded database


def test_an_embedded_postgres_that_does_not_start_is_refused_in_one_line(data_dir: Path) -> None:
    pg_dir = data_dir / "pg"
    pg_dir.mkdir(parents=True)
    (pg_dir / "PG_VERSION").write_text("99\n")  # a data dir no PostgreSQL 18 starts on

    refused = memvm(child_env(MEMVM_DATA_DIR=str(data_dir)), "serve", "--port", str(free_port()))

    assert_refused(refused, f"the embedded PostgreSQL in {pg_dir} did not start", f"its log is {pg_dir / 'log'}")


@pytest.mark.parametrize("command", [("keys", "list"), ("db", "upgrade"), ("backup", "{dir}/backup.dump")])
def test_other_commands_say_in_one_line_that_the_embedded_postgres_did_not_start(
    data_dir: Path, command: tuple[str, ...]
) -> None:
    pg_dir = data_dir / "pg"
    pg_dir.mkdir(parents=True)
    (pg_dir / "PG_VERSION").write_text("99\n")

    failed = memvm(child_env(MEMVM_DATA_DIR=str(data_dir)), *(part.format(dir=data_dir) for part in command))

    said = [line for line in failed.stderr.splitlines() if line.startswith("memvm: ")]
    assert failed.returncode == 1, failed.stderr
    assert len(said) == 1 and f"the embedded PostgreSQL in {pg_dir} did not start" in said[0], failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr
