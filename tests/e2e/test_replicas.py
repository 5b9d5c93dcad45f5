"""Two `memvm serve` processes on one database: the turn lock and otid de-duplication hold across
processes because they live in PostgreSQL."""

import asyncio
import contextlib

import httpx

from tests.support.serve import child_env, free_port, serve

MODEL = {"model": "openai/scripted-model"}


@contextlib.contextmanager
def two_replicas(tmp_path, database_url, llm):
    env = child_env(
        MEMVM_DATABASE_URL=database_url,
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY="k",
        MEMVM_TURN_LOCK_TIMEOUT_SECONDS="20",
    )
    port_a, port_b = free_port(), free_port()
    with (
        serve(tmp_path / "a.log", env, "--port", str(port_a), port=port_a) as a,
        serve(tmp_path / "b.log", env, "--port", str(port_b), port=port_b) as b,
    ):
        yield a.base_url, b.base_url


async def test_turn_lock_and_otid_hold_across_two_replicas(tmp_path, database_url, llm):
    llm.reply("first answer", delay=1.0).reply("second answer").reply("answered once")
    retry_body = {"messages": [{"role": "user", "content": "hello", "otid": "retry-me"}]}
    with two_replicas(tmp_path, database_url, llm) as (url_a, url_b):
        async with httpx.AsyncClient(timeout=30) as http:
            created = await http.post(
                f"{url_a}/v1/agents/", json={**MODEL, "memory_blocks": [{"label": "human", "value": "Bob"}]}
            )
            agent_id = created.json()["id"]

            first = asyncio.create_task(http.post(f"{url_a}/v1/agents/{agent_id}/messages", json={"input": "one"}))
            await asyncio.sleep(0.3)  # the first turn is now waiting on the model
            second = await http.post(f"{url_b}/v1/agents/{agent_id}/messages", json={"input": "two"})
            first = await first
            history = (await http.get(f"{url_b}/v1/agents/{agent_id}/messages", params={"order": "asc"})).json()

            original = await http.post(f"{url_a}/v1/agents/{agent_id}/messages", json=retry_body)
            retried = await http.post(f"{url_b}/v1/agents/{agent_id}/messages", json=retry_body)

    assert first.status_code == second.status_code == 200
    assert [m["content"] for m in history] == ["one", "first answer", "two", "second answer"]
    assert [m["content"] for m in llm.requests[1]["messages"][1:]] == ["one", "first answer", "two"]
    assert original.status_code == retried.status_code == 200
    assert retried.json()["messages"] == original.json()["messages"]
    assert len(llm.requests) == 3  # the retried otid did not call the model again
    logs = (tmp_path / "a.log").read_text() + (tmp_path / "b.log").read_text()
    assert "POST /v1/agents/" in logs and "HTTP Request:" not in logs  # the access log, not a line per model call


async def test_a_cancel_sent_to_one_replica_stops_the_turn_running_on_the_other(tmp_path, database_url, llm):
    llm.reply("too late", delay=20.0).reply("after the cancel")
    with two_replicas(tmp_path, database_url, llm) as (url_a, url_b):
        async with httpx.AsyncClient(timeout=30) as http:
            agent_id = (await http.post(f"{url_a}/v1/agents/", json=MODEL)).json()["id"]
            running = asyncio.create_task(http.post(f"{url_a}/v1/agents/{agent_id}/messages", json={"input": "one"}))
            run_ids: list[str] = []
            while not run_ids:
                await asyncio.sleep(0.05)
                active = await http.get(f"{url_b}/v1/runs/", params={"agent_id": agent_id, "active": "true"})
                run_ids = [run["id"] for run in active.json()]
            while not llm.requests:  # cancel once the turn is waiting on the model
                await asyncio.sleep(0.05)
            started = asyncio.get_running_loop().time()

            cancelled = await http.post(f"{url_b}/v1/agents/{agent_id}/messages/cancel", json={})
            stopped = await running
            waited = asyncio.get_running_loop().time() - started
            after = await http.post(f"{url_b}/v1/agents/{agent_id}/messages", json={"input": "two"})

    assert cancelled.json() == {run_ids[0]: "cancelled"}
    assert stopped.json()["stop_reason"]["stop_reason"] == "cancelled" and waited < 5.0
    assert after.json()["messages"][-1]["content"] == "after the cancel"


async def test_a_background_run_of_a_killed_replica_ends_failed_when_a_replica_starts(tmp_path, database_url, llm):
    llm.reply("never delivered", delay=30.0)
    env = child_env(MEMVM_DATABASE_URL=database_url, MEMVM_OPENAI_BASE_URL=llm.base_url, MEMVM_OPENAI_API_KEY="k")
    async with httpx.AsyncClient(timeout=30) as http:
        port = free_port()
        with serve(tmp_path / "doomed.log", env, "--port", str(port), port=port) as doomed:
            agent_id = (await http.post(f"{doomed.base_url}/v1/agents/", json=MODEL)).json()["id"]
            run = (await http.post(f"{doomed.base_url}/v1/agents/{agent_id}/messages/async", json={"input": "hi"})).json()
            while not llm.requests:  # the turn is running: it waits on the model
                await asyncio.sleep(0.05)
            doomed.process.kill()  # SIGKILL: no shutdown, the run stays `running` in the database
            doomed.process.wait(timeout=10)
        port = free_port()
        with serve(tmp_path / "next.log", env, "--port", str(port), port=port) as restarted:
            after = (await http.get(f"{restarted.base_url}/v1/runs/{run['id']}")).json()

    assert run["status"] in ("created", "running")
    assert after["status"] == "failed" and after["stop_reason"] == "error"
