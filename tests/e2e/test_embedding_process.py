"""`memvm serve` embeds in a worker process of its own: niced, never loading the model into the
server, and gone when the server is gone (also after kill -9)."""

import asyncio
import time
from pathlib import Path

import asyncpg
import httpx
import psutil

from memvm.orm.message import EMBEDDING_QUEUE_PREDICATE
from tests.support.pg import asyncpg_dsn
from tests.support.serve import child_env, free_port, serve

EMBEDDED_WITHIN = 30.0  # the worker loads the model on its first batch
COUNTS = f"""
    SELECT count(*) FILTER (WHERE {EMBEDDING_QUEUE_PREDICATE}) AS waiting, count(embedding) AS embedded
    FROM message WHERE agent_id = $1"""


def model_loaded(process: psutil.Process) -> bool:
    return any("onnxruntime" in region.path for region in process.memory_maps())


async def test_the_server_embeds_in_a_niced_worker_process_that_ends_with_it(tmp_path: Path, database_url: str, llm) -> None:
    llm.reply("hello")
    port = free_port()
    env = child_env(
        MEMVM_DATABASE_URL=database_url,
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY="x",
        MEMVM_EMBEDDING_PROCESS="true",
    )
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        server = psutil.Process(served.process.pid)
        [worker] = server.children()
        assert "worker" in " ".join(worker.cmdline()) and worker.nice() == 10
        async with httpx.AsyncClient(base_url=served.base_url, timeout=10.0) as http:
            agent = (await http.post("/v1/agents/", json={"model": "openai/scripted-model"})).json()
            sent = await http.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"})
            assert sent.status_code == 200, sent.text

        connection = await asyncpg.connect(**asyncpg_dsn(database_url))
        try:
            deadline, counts = time.monotonic() + EMBEDDED_WITHIN, None
            while time.monotonic() < deadline:
                counts = await connection.fetchrow(COUNTS, agent["id"])
                if counts["waiting"] == 0:
                    break
                await asyncio.sleep(0.2)
        finally:
            await connection.close()
        assert counts is not None and counts["waiting"] == 0 and counts["embedded"] >= 2, served.log()
        assert model_loaded(worker) and not model_loaded(server)  # the turn's messages were embedded elsewhere
        async with httpx.AsyncClient(base_url=served.base_url, timeout=10.0) as http:
            exposition = (await http.get("/metrics")).text
        embedded = [line for line in exposition.splitlines() if line.startswith("memvm_embedding_queue_embedded_total ")]
        assert embedded and float(embedded[0].split()[1]) >= 2  # the worker's count, scraped from the server

        server.kill()  # no chance to stop its worker: the worker ends with it all the same
        psutil.wait_procs([worker], timeout=20)
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
