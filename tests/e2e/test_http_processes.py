"""`memvm serve --workers 2`: two HTTP processes share the port as replicas do, forked from the server
so that they share the memory of its imported modules, the metrics add up across them, one that ends
is replaced, and a kill -9 of the server takes every process it started with it."""

import asyncio
import signal
import time
from pathlib import Path

import httpx
import psutil

from tests.support.serve import (
    STOP_TIMEOUT,
    assert_postgres_stopped,
    child_env,
    free_port,
    postmaster_pid,
    serve,
)

REQUESTS = 40


SHARED_MIB = 40  # a forked process shares about 80 MiB of its parent's heap while idle


def http_processes(server: psutil.Process) -> list[psutil.Process]:
    return [child for child in server.children() if child.name() == "memvm-http"]


def shared_heap_mib(process: psutil.Process) -> float:
    """Written pages this process shares with another: after a fork, the parent's heap (the imported
    modules) until one of them writes to a page. A process started afresh (spawn) shares none: its
    shared pages are only the libraries' files."""
    rollup = Path(f"/proc/{process.pid}/smaps_rollup").read_text().splitlines()[1:]
    fields = {name: value.split()[0] for name, value in (line.split(":", 1) for line in rollup)}
    return int(fields["Shared_Dirty"]) / 1024


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
        assert [shared_heap_mib(worker) > SHARED_MIB for worker in workers] == [True, True], served.log()

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


def replacement_of(ended: psutil.Process, server: psutil.Process) -> list[psutil.Process]:
    """The server's HTTP processes once one has taken the place of `ended`, or as they are after STOP_TIMEOUT."""
    deadline = time.monotonic() + STOP_TIMEOUT
    while True:
        workers = http_processes(server)
        if (len(workers) == 2 and ended not in workers) or time.monotonic() > deadline:
            return workers
        time.sleep(0.1)


def test_an_http_process_that_ends_is_replaced_and_the_database_stays_up(tmp_path: Path, data_dir: Path) -> None:
    """It ends as the server would end it (SIGTERM), without the server's own exit handlers: those
    stop the embedded PostgreSQL and the embedding worker, and run only when the server itself ends."""
    port = free_port()
    env = child_env(MEMVM_DATA_DIR=str(data_dir), MEMVM_WORKERS="2", MEMVM_EMBEDDING_PROCESS="true")
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        server = psutil.Process(served.process.pid)
        postmaster = psutil.Process(postmaster_pid(data_dir / "pg"))
        [worker] = [child for child in server.children() if child.name() == "memvm-worker"]
        ended = http_processes(server)[0]
        ended.send_signal(signal.SIGTERM)
        ended.wait(timeout=STOP_TIMEOUT)

        workers = replacement_of(ended, server)
        assert len(workers) == 2 and ended not in workers, served.log()
        # Fresh connections, so that both processes answer.
        statuses = {httpx.get(f"{served.base_url}/v1/agents/", timeout=10.0).status_code for _ in range(10)}
        assert statuses == {200} and httpx.get(f"{served.base_url}/metrics", timeout=10.0).status_code == 200
        assert postmaster.is_running() and worker.is_running(), served.log()

        everything = [server, *server.children(recursive=True)]
        assert served.interrupt(signal.SIGTERM) == 0, served.log()
        assert_postgres_stopped(data_dir / "pg", postmaster, served.log())
        gone, alive = psutil.wait_procs(everything, timeout=STOP_TIMEOUT)
        assert alive == [], served.log()
