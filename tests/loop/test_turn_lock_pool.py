"""The turn-lock pool is bounded: sends beyond it queue for a connection instead of opening more
(PostgreSQL's max_connections ran out at 64 turns in flight on one process), and one that waits too
long gets a 503 worth retrying."""

import asyncio

from tests.support.api import app_client, create_agent

MODEL = {"model": "openai/scripted-model"}
# Every client session of the test's database but the test's own (the `db` fixture's); an
# autovacuum worker on that database is listed there too, and is not memvm's.
MEMVM_CONNECTIONS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND backend_type = 'client backend'"
)
LISTENERS = 2  # key revocations and run cancellations (accounts/key_cache.py, runtime/loop/cancel.py)


async def most_connections_while(db, work: asyncio.Future) -> int:
    """The most connections memvm had open, sampled until `work` is done."""
    most = 0
    while not work.done():
        most = max(most, await db.fetchval(MEMVM_CONNECTIONS))
        await asyncio.sleep(0.01)
    return most


SMALL_POOLS = {"db_pool_size": 2, "db_max_overflow": 0, "db_turn_lock_pool_size": 2, "embedding_worker": False}


async def agents_with_slow_answers(client, llm, count: int) -> list[dict]:
    """`count` agents, and an answer for each slow enough that all their turns are in flight at once."""
    agents = [await create_agent(client, **MODEL) for _ in range(count)]
    for _ in agents:
        llm.reply("answer", delay=0.3)
    return agents


async def test_sends_beyond_the_turn_lock_pool_queue_and_stay_within_the_connection_budget(settings, llm, db):
    turns = 6
    async with app_client(settings.model_copy(update=SMALL_POOLS)) as client:
        agents = await agents_with_slow_answers(client, llm, turns)
        sends = asyncio.gather(*(client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"}) for agent in agents))
        most = await most_connections_while(db, sends)
        answers = await sends

    assert [answer.status_code for answer in answers] == [200] * turns
    assert len(llm.requests) == turns
    assert most <= 2 + 2 + LISTENERS  # sessions + turn locks + listeners


async def test_a_send_that_waits_too_long_for_a_turn_lock_connection_gets_503(settings, llm):
    settings = settings.model_copy(
        update={"db_turn_lock_pool_size": 1, "db_pool_timeout_seconds": 0.3, "embedding_worker": False}
    )
    async with app_client(settings) as client:
        slow_agent, other_agent = await create_agent(client, **MODEL), await create_agent(client, **MODEL)
        llm.reply("slow answer", delay=2.0).reply("never sent")
        slow = asyncio.create_task(client.post(f"/v1/agents/{slow_agent['id']}/messages", json={"input": "one"}))
        for _ in range(1000):  # the slow turn holds the only turn-lock connection once its model call is under way
            if llm.requests:
                break
            await asyncio.sleep(0.01)
        refused = await client.post(f"/v1/agents/{other_agent['id']}/messages", json={"input": "two"})
        done = await slow

    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "MEMVM_DB_TURN_LOCK_POOL_SIZE" in refused.json()["detail"]
    assert "x-should-retry" not in refused.headers  # the SDK retries it
    assert done.status_code == 200 and len(llm.requests) == 1


async def test_sends_piled_up_on_one_busy_agent_leave_the_pool_to_other_agents(settings, llm):
    """Sends to a busy agent wait in line without a connection: with a bounded pool, waiting on the
    agent's lock with one would let one client's retries starve every other agent's turns."""
    settings = settings.model_copy(
        update={"db_turn_lock_pool_size": 2, "db_pool_timeout_seconds": 1.0, "embedding_worker": False}
    )
    async with app_client(settings) as client:
        busy_agent, other_agent = await create_agent(client, **MODEL), await create_agent(client, **MODEL)
        llm.reply("slow answer", delay=2.5).reply("other answer").reply("1").reply("2").reply("3")
        send = f"/v1/agents/{busy_agent['id']}/messages"
        slow = asyncio.create_task(client.post(send, json={"input": "slow"}))
        while not llm.requests:  # the slow turn holds the agent's lock
            await asyncio.sleep(0.01)
        piled_up = [asyncio.create_task(client.post(send, json={"input": str(n)})) for n in range(3)]
        await asyncio.sleep(0.2)  # they are waiting for the agent
        other = await client.post(f"/v1/agents/{other_agent['id']}/messages", json={"input": "hi"})
        answers = [await slow, *[await waiting for waiting in piled_up]]

    assert other.status_code == 200 and other.json()["messages"][-1]["content"] == "other answer"
    assert [answer.status_code for answer in answers] == [200] * 4


async def test_a_burst_of_background_sends_claims_its_runs_on_one_connection(settings, llm, db):
    """Each background run is claimed until it ends, queued ones too: a connection per claim let a burst
    of background sends open one PostgreSQL connection per run."""
    runs = 8
    async with app_client(settings.model_copy(update=SMALL_POOLS)) as client:
        agents = await agents_with_slow_answers(client, llm, runs)
        queued = [
            (await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "hi"})).json()["id"] for agent in agents
        ]
        most = await most_connections_while(db, asyncio.ensure_future(all_ended(client, queued)))
        statuses = [(await client.get(f"/v1/runs/{run_id}")).json()["status"] for run_id in queued]

    assert statuses == ["completed"] * runs
    assert most <= 2 + 2 + 1 + LISTENERS  # sessions + turn locks + the claims connection + listeners


async def all_ended(client, run_ids: list[str]) -> None:
    for run_id in run_ids:
        while (await client.get(f"/v1/runs/{run_id}")).json()["status"] in ("created", "running"):
            await asyncio.sleep(0.05)
