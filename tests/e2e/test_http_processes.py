"""`memvm serve --workers 2`: two HTTP processes share the port as replicas do, the metrics add up
across them, and a kill -9 of the server takes every process it started with it."""

import asyncio
from pathlib import Path

import httpx
import psutil

from tests.support.serve import child_env, free_port, serve

REQUESTS = 40


def http_processes(server: psutil.Process) -> list[psutil.Process]:
    return [child for child in server.children() if "spawn_main" in " ".join(child.cmdline())]


def summed(exposition: str, sample: str) -> float:
    prefix = f"{sample} "
    return sum(float(line.removeprefix(prefix)) for line in exposition.splitlines() if line.startswith(prefix))


def requests_counted(exposition: str, route: str) -> float:
    return summed(exposition, f'memvm_http_requests_total{{method="GET",route="{route}",status="200"}}')


async def test_two_http_processes_serve_one_port_and_end_with_the_server(tmp_path: Path, database_url: str, llm) -> None:
    llm.reply("one").reply("two")
    port = free_port()
    env = child_env(
        MEMVM_DATABASE_URL=database_url,
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY="x",
        MEMVM_WORKERS="2",
        MEMVM_EMBEDDING_PROCESS="true",
    )
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        assert "2 HTTP process(es)" in served.first_line(), served.log()
        server = psutil.Process(served.process.pid)
        workers = http_processes(server)
        assert len(workers) == 2, served.log()

        async def fresh_connection_get(path: str) -> httpx.Response:
            async with httpx.AsyncClient(base_url=served.base_url, timeout=10.0) as http:
                return await http.get(path)

        answers = await asyncio.gather(*(fresh_connection_get("/v1/agents/") for _ in range(REQUESTS)))
        assert {answer.status_code for answer in answers} == {200}
        async with httpx.AsyncClient(base_url=served.base_url, timeout=10.0) as http:
            agent = (await http.post("/v1/agents/", json={"model": "openai/scripted-model"})).json()
            for text in ("hi", "again"):  # a turn, whichever process takes it, sees the one before
                sent = await http.post(f"/v1/agents/{agent['id']}/messages", json={"input": text})
                assert sent.status_code == 200, sent.text
            exposition = (await http.get("/metrics")).text
        assert [m["content"] for m in llm.requests[1]["messages"][1:]] == ["hi", "one", "again"]
        assert requests_counted(exposition, "/v1/agents/") == REQUESTS  # every process's count, summed
        # Each process's pool kept the connections its requests used; gauges, too, add up over processes.
        assert summed(exposition, 'memvm_db_pool_connections{state="idle"}') >= 1
        assert 'memvm_db_pool_connections{state="in_use"}' in exposition

        everything = [server, *server.children(recursive=True)]
        server.kill()
        gone, alive = psutil.wait_procs(everything, timeout=20)
        assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == [], served.log()
