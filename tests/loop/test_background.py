"""Background turns: /messages/async answers with the run at once and the turn runs on; every event
is stored with a seq_id, so POST /v1/runs/{id}/stream replays from any cursor and follows a live
run to its end; a run left `running` by a dead process is failed by the next turn or at start-up."""

import asyncio
import json

from memvm.runtime.loop.run_claims import RUN_CLAIM_CLASS
from tests.support.api import app_client, create_agent
from tests.support.sse import parse_sse

MODEL = {"model": "openai/scripted-model"}


async def wait_finished(client, run_id: str) -> dict:
    for _ in range(400):
        run = (await client.get(f"/v1/runs/{run_id}")).json()
        if run["status"] not in ("created", "running"):
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


async def test_async_returns_the_run_at_once_and_the_turn_runs_on(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})], delay=1.5).reply("Noted.")

    queued = await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "I like tea"})
    # Not timed (a loaded machine is slow): the model holds its first answer 1.5 s, so a run that is not
    # finished when the POST answers shows that the POST did not wait for the turn.
    run = await wait_finished(client, queued.json()["id"])
    messages = (await client.get(f"/v1/runs/{run['id']}/messages")).json()

    assert queued.status_code == 200
    assert queued.json()["status"] in ("created", "running") and queued.json()["background"] is True
    assert run["status"] == "completed" and run["stop_reason"] == "end_turn"
    assert [m["message_type"] for m in messages][-1] == "assistant_message" and messages[-1]["content"] == "Noted."


async def test_a_run_streams_from_a_cursor_and_follows_it_live(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})], delay=0.5).reply("Noted.", delay=0.5)
    run_id = (await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "hi"})).json()["id"]

    live = parse_sse((await client.post(f"/v1/runs/{run_id}/stream", json={})).text)
    replayed = parse_sse((await client.post(f"/v1/runs/{run_id}/stream")).text)
    resumed = parse_sse((await client.post(f"/v1/runs/{run_id}/stream", json={"starting_after": 2})).text)

    types = [e.get("message_type") for e in live]
    assert types == ["tool_call_message", "tool_return_message", "assistant_message", "stop_reason", "usage_statistics", None]
    assert [e.get("seq_id") for e in live[:-1]] == [1, 2, 3, 4, 5] and live[-1] == {"done": True}
    assert replayed == live
    assert resumed == live[2:]


async def test_background_on_the_stream_route(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("Hello.")

    events = parse_sse(
        (await client.post(f"/v1/agents/{agent['id']}/messages/stream", json={"input": "hi", "background": True})).text
    )

    assert [e.get("message_type") for e in events][:2] == ["assistant_message", "stop_reason"]
    assert events[0]["content"] == "Hello." and events[-1] == {"done": True}


async def test_a_background_send_the_agent_refuses_is_an_http_error_and_queues_nothing(client, llm, db):
    agent = await create_agent(client, **MODEL)

    refused = await client.post(
        f"/v1/agents/{agent['id']}/messages/async", json={"messages": [{"type": "approval", "approve": True}]}
    )
    streamed = await client.post(
        f"/v1/agents/{agent['id']}/messages/stream",
        json={"messages": [{"type": "approval", "approve": True}], "background": True},
    )

    assert refused.status_code == streamed.status_code == 400
    assert "not waiting for an approval" in refused.json()["detail"]
    assert await db.fetchval("SELECT count(*) FROM run WHERE agent_id = $1", agent["id"]) == 0


async def test_a_run_left_running_by_a_dead_process_is_failed(settings, llm, db):
    async with app_client(settings) as client:
        agent = await create_agent(client, **MODEL)
        organization = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
        for run_id in ("run-00000000-0000-4000-8000-00000000000a", "run-00000000-0000-4000-8000-00000000000b"):
            await db.execute(
                "INSERT INTO run (id, agent_id, status, organization_id) VALUES ($1, $2, 'running', $3)",
                run_id,
                agent["id"],
                organization,
            )
        llm.reply("Hello.")
        await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"})  # the next turn fails them
        after_turn = await db.fetch("SELECT status FROM run WHERE id LIKE 'run-00000000%'")
        await db.execute("UPDATE run SET status = 'running' WHERE id LIKE 'run-00000000%'")

    async with app_client(settings) as restarted:
        await restarted.get("/v1/health/")
        after_start = await db.fetch("SELECT status FROM run WHERE id LIKE 'run-00000000%'")

    assert [row["status"] for row in after_turn] == ["failed", "failed"]
    assert [row["status"] for row in after_start] == ["failed", "failed"]


async def test_a_run_queued_by_a_dead_process_is_failed_at_start_up_but_not_one_a_live_process_holds(settings, llm, db):
    """A background run waits `created` behind a busy agent. Killed then, its process left it so for
    good: the next start-up fails it, as no live process holds its claim. A replica starting while
    a live process holds one of its runs queued leaves that run alone, and it runs."""
    dead = "run-00000000-0000-4000-8000-00000000000c"
    llm.reply("slow first", delay=3.0).reply("queued answer")
    async with app_client(settings) as client:
        agent = await create_agent(client, **MODEL)
        organization = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
        await db.execute(
            "INSERT INTO run (id, agent_id, status, background, organization_id) VALUES ($1, $2, 'created', true, $3)",
            dead,
            agent["id"],
            organization,
        )
        first = (await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "one"})).json()
        queued = (await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "two"})).json()
        async with app_client(settings) as replica:  # another process starts while both wait
            await replica.get("/v1/health/")
            at_start = {row["id"]: row["status"] for row in await db.fetch("SELECT id, status FROM run")}
        done = [await wait_finished(client, run["id"]) for run in (first, queued)]

    assert at_start == {dead: "failed", first["id"]: "running", queued["id"]: "created"}
    assert [run["status"] for run in done] == ["completed", "completed"]


async def test_the_finished_run_is_posted_to_the_callback_url_with_a_retry(client, llm):
    received: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        received.append(await reader.readexactly(length))
        status = b"503 Service Unavailable" if len(received) == 1 else b"200 OK"  # the first try fails
        writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/done"
    agent = await create_agent(client, **MODEL)
    llm.reply("Hello.")
    async with server:
        run_id = (
            await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "hi", "callback_url": url})
        ).json()["id"]
        for _ in range(100):
            run = (await client.get(f"/v1/runs/{run_id}")).json()
            if run["callback_sent_at"]:
                break
            await asyncio.sleep(0.1)
    bad = await client.post(
        f"/v1/agents/{agent['id']}/messages/async", json={"input": "hi", "callback_url": "file:///etc/passwd"}
    )

    assert len(received) == 2 and json.loads(received[-1])["id"] == run_id and json.loads(received[-1])["status"] == "completed"
    assert run["callback_url"] == url and run["callback_status_code"] == 200 and run["callback_error"] is None
    assert bad.status_code == 422


async def test_a_stream_waits_for_the_events_stored_after_the_run_ended_while_its_claim_is_held(client, db):
    """A background turn commits its end with its last step and stores its last events just after:
    a follower that sees the run ended with no new event must not stop while the claim is held."""
    agent = await create_agent(client, **MODEL)
    run_id = "run-00000000-0000-4000-8000-00000000c1a1"
    organization = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
    await db.execute(
        "INSERT INTO run (id, organization_id, agent_id, status, stop_reason, background, completed_at) "
        "VALUES ($1, $2, $3, 'cancelled', 'cancelled', true, now())",
        run_id,
        organization,
        agent["id"],
    )
    await db.execute("SELECT pg_advisory_lock($1, hashtext($2))", RUN_CLAIM_CLASS, run_id)  # the running process's claim

    stream = asyncio.create_task(client.post(f"/v1/runs/{run_id}/stream", json={"poll_interval": 0.05}))
    await asyncio.sleep(0.5)
    last = {"message_type": "stop_reason", "stop_reason": "cancelled", "seq_id": 1}
    await db.execute(
        "INSERT INTO run_event (run_id, organization_id, seq, payload) VALUES ($1, $2, 1, $3::jsonb)",
        run_id,
        organization,
        json.dumps(last),
    )
    await db.execute("SELECT pg_advisory_unlock($1, hashtext($2))", RUN_CLAIM_CLASS, run_id)  # the run's process is done
    events = parse_sse((await asyncio.wait_for(stream, 10)).text)

    assert [e["stop_reason"] for e in events if e.get("message_type") == "stop_reason"] == ["cancelled"]
