"""End-to-end: the real `memvm` process (console script), spoken to over loopback TCP."""

import asyncio
import signal
import subprocess
import uuid
from pathlib import Path

import asyncpg
import httpx
import psutil
from alembic.script import ScriptDirectory

from memvm import __version__
from memvm.db.migrate import alembic_config
from tests.support.pg import admin_execute, asyncpg_dsn, with_database
from tests.support.serve import STOP_TIMEOUT, assert_postgres_stopped, child_env, free_port, memvm_command, postmaster_pid, serve

CLI_TIMEOUT = 60.0


def run_cli(*commands: tuple[str, ...]) -> list[tuple[int, str]]:
    """Run several `memvm` invocations concurrently (each pays ~1.5 s of imports); (exit code, output) each."""
    processes = [
        subprocess.Popen(
            memvm_command(*args),
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for args in commands
    ]
    results = []
    try:
        for process in processes:
            output, _ = process.communicate(timeout=CLI_TIMEOUT)
            results.append((process.returncode, output))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT)
    return results


def create_agent(http: httpx.Client, name: str) -> dict:
    response = http.post(
        "/v1/agents/",
        json={"name": name, "memory_blocks": [{"label": "human", "value": "Name: Bob"}]},
    )
    assert response.status_code == 200, response.text
    agent = response.json()
    assert agent["id"].startswith("agent-")
    return agent


def test_serve_with_database_url_logs_it_first_and_serves(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = child_env(MEMVM_DATABASE_URL=database_url)
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        first = served.first_line()
        assert "external PostgreSQL" in first, served.log()
        assert "embedded" not in first

        with httpx.Client(base_url=served.base_url, timeout=10.0) as http:
            agent = create_agent(http, "e2e-external")
            blocks = f"/v1/agents/{agent['id']}/core-memory/blocks"

            block = http.get(f"{blocks}/human")
            assert block.status_code == 200, block.text
            assert block.json()["value"] == "Name: Bob"
            assert block.json()["label"] == "human"

            patched = http.patch(f"{blocks}/human", json={"value": "Name: Bob Smith"})
            assert patched.status_code == 200, patched.text
            assert patched.json()["value"] == "Name: Bob Smith"

            prompt = http.post(f"/v1/agents/{agent['id']}/recompile")
            assert prompt.status_code == 200, prompt.text
            assert f"operator console: http://127.0.0.1:{port}/ui/" in served.log()
            text = prompt.json()
            assert isinstance(text, str)
            assert "Name: Bob Smith" in text
            assert "chars_current=15" in text

        assert served.interrupt() == 0, served.log()
    # The lifespan shut down cleanly (no traceback on the way out).
    assert "Traceback" not in served.log(), served.log()


def test_serve_embedded_default_starts_stops_and_reuses_data(tmp_path: Path, data_dir: Path) -> None:
    pg_dir = data_dir / "pg"
    port = free_port()
    env = child_env(MEMVM_DATA_DIR=str(data_dir), MEMVM_PORT=str(port))
    assert "MEMVM_DATABASE_URL" not in env

    # First run: initdb, start, migrate, create an agent.
    with serve(tmp_path / "serve-1.log", env, port=port) as served:
        first = served.first_line()
        assert "embedded PostgreSQL" in first, served.log()
        assert str(pg_dir) in first, served.log()
        postmaster = psutil.Process(postmaster_pid(pg_dir))
        assert postmaster.is_running()

        with httpx.Client(base_url=served.base_url, timeout=10.0) as http:
            agent = create_agent(http, "e2e-embedded")

        assert served.interrupt() == 0, served.log()
        assert_postgres_stopped(pg_dir, postmaster, served.log())

    # Second run on the same data dir (and a fresh port): a new postmaster, the same data.
    port = free_port()
    env["MEMVM_PORT"] = str(port)
    with serve(tmp_path / "serve-2.log", env, port=port) as served:
        assert "embedded PostgreSQL" in served.first_line(), served.log()
        second_postmaster = psutil.Process(postmaster_pid(pg_dir))
        assert second_postmaster.pid != postmaster.pid or second_postmaster.create_time() != postmaster.create_time()

        with httpx.Client(base_url=served.base_url, timeout=10.0) as http:
            again = http.get(f"/v1/agents/{agent['id']}")
            assert again.status_code == 200, again.text
            assert again.json()["id"] == agent["id"]
            assert again.json()["name"] == "e2e-embedded"
            block = http.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")
            assert block.status_code == 200, block.text
            assert block.json()["value"] == "Name: Bob"

        assert served.interrupt(signal.SIGTERM) == 0, served.log()
        assert_postgres_stopped(pg_dir, second_postmaster, served.log())


def test_cli_help_lists_commands() -> None:
    (top_code, top), (db_code, db), (version_code, version) = run_cli(("--help",), ("db", "--help"), ("version",))

    assert top_code == 0, top
    commands = top.split("commands:", 1)[-1]
    for command in ("serve", "keys", "agents", "db", "version"):
        assert f"    {command} " in commands, top

    assert db_code == 0, db
    assert "upgrade" in db.split("db commands:", 1)[-1], db

    assert version_code == 0, version
    assert version.strip() == f"memvm {__version__}"


async def run_cli_async(*args: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *memvm_command(*args),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=CLI_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode, output.decode(errors="replace")


async def test_db_upgrade_prints_plan(server_url: str) -> None:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head
    name = f"e2e_upgrade_{uuid.uuid4().hex[:12]}"
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    env = child_env(MEMVM_DATABASE_URL=with_database(server_url, name))

    code, output = await run_cli_async("db", "upgrade", env=env)
    assert code == 0, output
    assert "external PostgreSQL" in output, output
    assert f"(empty) → {head}" in output, output
    assert "upgraded" in output, output

    connection = await asyncpg.connect(**asyncpg_dsn(with_database(server_url, name)))
    try:
        assert await connection.fetchval("SELECT version_num FROM alembic_version") == head
    finally:
        await connection.close()

    code, output = await run_cli_async("db", "upgrade", env=env)
    assert code == 0, output
    assert f"{head} → {head}" in output, output
    assert "already at the latest revision" in output, output
    assert "upgraded" not in output, output
