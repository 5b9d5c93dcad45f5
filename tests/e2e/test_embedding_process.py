"""`memvm serve` embeds in a worker process of its own (forked from the server): niced, never loading
the model into the server, and gone when the server is gone (also after kill -9)."""

import asyncio
import subprocess
import time
from pathlib import Path

import asyncpg
import httpx
import psutil

from memvm.db.migrate import HEAD_REVISION
from memvm.orm.message import EMBEDDING_QUEUE_PREDICATE
from tests.support.pg import admin_execute, asyncpg_dsn, with_database
from tests.support.serve import STOP_TIMEOUT, child_env, free_port, memvm, memvm_command, serve

EMBEDDED_WITHIN = 30.0  # the worker loads the model on its first batch
COUNTS = f"""
    SELECT count(*) FILTER (WHERE {EMBEDDING_QUEUE_PREDICATE}) AS waiting, count(embedding) AS embedded
    FROM message WHERE agent_id = $1"""


def model_loaded(process: psutil.Process) -> bool:
    return any("onnxruntime" in region.path for region in process.memory_maps())


def serve_env(database_url: str, llm, **more: str) -> dict[str, str]:
    """`memvm serve` with its embedding worker process, on `database_url`, talking to the scripted model."""
    return child_env(
        MEMVM_DATABASE_URL=database_url,
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY="x",
        MEMVM_EMBEDDING_PROCESS="true",
        **more,
    )


async def one_turn(base_url: str) -> str:
    """A new agent's turn, which stores messages to embed; the agent's id."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10.0) as http:
        agent = (await http.post("/v1/agents/", json={"model": "openai/scripted-model"})).json()
        sent = await http.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"})
        assert sent.status_code == 200, sent.text
    return agent["id"]


async def embedded_messages(database_url: str, agent_id: str) -> asyncpg.Record:
    """The agent's message counts once none waits for its vector, or after EMBEDDED_WITHIN."""
    connection = await asyncpg.connect(**asyncpg_dsn(database_url))
    try:
        deadline = time.monotonic() + EMBEDDED_WITHIN
        while (counts := await connection.fetchrow(COUNTS, agent_id))["waiting"] and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        return counts
    finally:
        await connection.close()


async def test_the_server_embeds_in_a_niced_worker_process_that_ends_with_it(tmp_path: Path, database_url: str, llm) -> None:
    llm.reply("hello")
    port = free_port()
    env = serve_env(database_url, llm)
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        server = psutil.Process(served.process.pid)
        [worker] = server.children()
        assert worker.name() == "memvm-worker" and worker.nice() == 10
        agent_id = await one_turn(served.base_url)

        counts = await embedded_messages(database_url, agent_id)
        assert counts["waiting"] == 0 and counts["embedded"] >= 2, served.log()
        assert model_loaded(worker) and not model_loaded(server)  # the turn's messages were embedded elsewhere
        async with httpx.AsyncClient(base_url=served.base_url, timeout=10.0) as http:
            exposition = (await http.get("/metrics")).text
        embedded = [line for line in exposition.splitlines() if line.startswith("memvm_embedding_queue_embedded_total ")]
        assert embedded and float(embedded[0].split()[1]) >= 2  # the worker's count, scraped from the server

        server.kill()  # no chance to stop its worker: the worker ends with it all the same
        psutil.wait_procs([worker], timeout=20)
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE


async def empty_database(server_url: str, tmp_path: Path) -> str:
    """A database with no schema at all, as a new deployment starts."""
    name = f"e2e_fresh_{tmp_path.name[-20:].lower().replace('-', '_')}"
    await admin_execute(server_url, f"DROP DATABASE IF EXISTS {name}")
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    return with_database(server_url, name)


async def test_the_first_start_on_a_new_database_embeds_once_migrated_without_a_traceback(
    tmp_path: Path, server_url: str, llm
) -> None:
    llm.reply("hello")
    database_url = await empty_database(server_url, tmp_path)
    port = free_port()
    env = serve_env(database_url, llm, MEMVM_EMBEDDING_POLL_SECONDS="0.2")
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        agent_id = await one_turn(served.base_url)
        counts = await embedded_messages(database_url, agent_id)
        log = served.log()

    assert f"database created at {HEAD_REVISION} from head_schema.sql" in log
    assert counts["waiting"] == 0 and counts["embedded"] >= 2, log
    assert "Traceback" not in log and "does not exist" not in log and "ERROR" not in log, log


def test_a_worker_alone_waits_for_the_schema_then_embeds(tmp_path: Path, server_url: str) -> None:
    database_url = asyncio.run(empty_database(server_url, tmp_path))
    env = child_env(MEMVM_DATABASE_URL=database_url, MEMVM_EMBEDDING_POLL_SECONDS="0.2")
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log_file:
        worker = subprocess.Popen(memvm_command("worker"), env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        wait_for_line(log_path, "waiting for the database schema (it is at no revision yet")
        upgraded = memvm(env, "db", "upgrade")
        assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
        wait_for_line(log_path, "the database schema is at")
    finally:
        worker.terminate()
        worker.wait(timeout=STOP_TIMEOUT)
    log = log_path.read_text()

    assert worker.returncode == 0, log
    assert "Traceback" not in log and "does not exist" not in log and "ERROR" not in log, log


def wait_for_line(log_path: Path, text: str) -> None:
    deadline = time.monotonic() + EMBEDDED_WITHIN
    while text not in log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert text in log_path.read_text(), log_path.read_text()
