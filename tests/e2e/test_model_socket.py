"""`memvm serve` with two HTTP processes loads the embedding model once, in its worker, which lends it
to them over a Unix socket (embeddings/model_socket.py); a worker killed with -9 is replaced, and
searches answer meanwhile."""

import time
from pathlib import Path

import httpx
import psutil

from tests.e2e.test_embedding_process import model_loaded, serve_env
from tests.support.serve import free_port, serve

RESTARTED_WITHIN = 20.0  # the supervisor starts another at most every 5 s, and watches every 0.5 s


def search(http: httpx.Client, agent_id: str, query: str) -> list[str]:
    response = http.get(f"/v1/agents/{agent_id}/archival-memory/search", params={"query": query})
    assert response.status_code == 200, response.text
    return [hit["content"] for hit in response.json()["results"]]


def processes_named(server: psutil.Process, name: str) -> list[psutil.Process]:
    return [child for child in server.children() if child.name() == name]


def next_worker(server: psutil.Process, killed: int) -> psutil.Process:
    deadline = time.monotonic() + RESTARTED_WITHIN
    while time.monotonic() < deadline:
        workers = [worker for worker in processes_named(server, "memvm-worker") if worker.pid != killed]
        if workers and workers[0].status() != psutil.STATUS_ZOMBIE:
            return workers[0]
        time.sleep(0.1)
    raise AssertionError(f"no new embedding worker within {RESTARTED_WITHIN:.0f}s")


def test_only_the_worker_holds_the_model_and_a_killed_worker_is_replaced(tmp_path: Path, database_url: str, llm) -> None:
    port = free_port()
    env = serve_env(database_url, llm, MEMVM_WORKERS="2")
    with (
        serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served,
        httpx.Client(base_url=served.base_url, timeout=30.0) as http,
    ):
        server = psutil.Process(served.process.pid)
        agent_id = http.post("/v1/agents/", json={"model": "openai/scripted-model"}).json()["id"]
        for text in ("Bob's daughter plays the violin.", "The wifi password is on the fridge."):
            assert http.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": text}).status_code == 200
        # Several calls, so that both HTTP processes answer some (each with a query of its own).
        for n in range(6):
            assert search(http, agent_id, f"Which instrument does his kid study? ({n})")[0].startswith("Bob's")
            embedded = http.post("/v1/embeddings", json={"input": [f"text {n}", "another"], "encoding_format": "float"})
            assert embedded.status_code == 200 and embedded.json()["usage"]["prompt_tokens"] > 0, embedded.text

        http_processes = processes_named(server, "memvm-http")
        [worker] = processes_named(server, "memvm-worker")
        assert len(http_processes) == 2 and model_loaded(worker), served.log()
        assert not any(model_loaded(process) for process in [server, *http_processes]), served.log()

        worker.kill()
        assert search(http, agent_id, "Where is the code for the internet?")[0].startswith("The wifi")
        replacement = next_worker(server, worker.pid)
        assert replacement.nice() == 10
        log = served.log()

    assert "the embedding worker (pid" in log and "ended; starting another" in log, log
