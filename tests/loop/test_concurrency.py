import asyncio

from tests.support.api import app_client, create_agent

MODEL = {"model": "openai/scripted-model"}


async def test_concurrent_sends_to_one_agent_run_one_after_the_other(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("first answer", delay=0.5).reply("second answer")

    first, second = await asyncio.gather(
        client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "one"}),
        client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "two"}),
    )

    assert first.status_code == second.status_code == 200
    history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc"})).json()
    contents = [m["content"] for m in history]
    assert contents in (["one", "first answer", "two", "second answer"], ["two", "first answer", "one", "second answer"])
    assert llm.requests[1]["messages"][-3:-1] == [
        {"role": "user", "content": contents[0]},
        {"role": "assistant", "content": "first answer"},
    ]


async def test_busy_agent_gets_409_after_the_bounded_wait(settings, llm):
    async with app_client(settings.model_copy(update={"turn_lock_timeout_seconds": 0.2})) as client:
        agent = await create_agent(client, **MODEL)
        llm.reply("slow answer", delay=3.0)

        slow = asyncio.create_task(client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "one"}))
        for _ in range(1000):  # the first turn holds the lock once its model call is under way
            if llm.requests:
                break
            await asyncio.sleep(0.01)
        busy = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "two"})
        done = await slow

    assert busy.status_code == 409
    assert "busy with another active run" in busy.json()["detail"] and busy.headers["x-should-retry"] == "false"
    assert done.status_code == 200
    assert len(llm.requests) == 1


async def test_repeated_otid_returns_the_stored_result_without_running_again(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "x"})]).reply("done once")
    body = {"messages": [{"role": "user", "content": "do it", "otid": "client-otid-1"}]}

    first = await client.post(f"/v1/agents/{agent['id']}/messages", json=body)
    retry = await client.post(f"/v1/agents/{agent['id']}/messages", json=body)

    assert first.status_code == retry.status_code == 200
    assert retry.json()["messages"] == first.json()["messages"]
    assert retry.json()["stop_reason"] == first.json()["stop_reason"]
    assert len(llm.requests) == 2
    assert await db.fetchval("SELECT count(*) FROM message WHERE role = 'user'") == 1


async def test_provider_timeout_ends_with_llm_api_error(settings, llm, db):
    async with app_client(settings.model_copy(update={"llm_timeout_seconds": 0.3, "llm_attempts": 1})) as client:
        agent = await create_agent(client, **MODEL)
        llm.hang(3)

        response = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hello?"})

    assert response.json()["stop_reason"]["stop_reason"] == "llm_api_error"
    assert await db.fetchval("SELECT count(*) FROM message") == 0


async def test_repeated_otid_of_a_deleted_run_gets_409_and_runs_nothing(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.reply("done once")
    body = {"messages": [{"role": "user", "content": "do it", "otid": "client-otid-2"}]}
    first = await client.post(f"/v1/agents/{agent['id']}/messages", json=body)
    run_id = first.json()["messages"][0]["run_id"]
    assert (await client.delete(f"/v1/runs/{run_id}")).status_code == 204

    retry = await client.post(f"/v1/agents/{agent['id']}/messages", json=body)

    assert retry.status_code == 409 and retry.headers["x-should-retry"] == "false"
    assert f"run {run_id!r}" in retry.json()["detail"] and "new otid" in retry.json()["detail"]
    assert len(llm.requests) == 1
    assert await db.fetchval("SELECT count(*) FROM message") == 2
