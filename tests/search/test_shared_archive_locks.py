"""Agents that read each other's archives write passages at once without a deadlock. Every writer of an
archive's passages locks its counts (the archive row) before the agents it recompiles, as a turn's
step does (blocks, then archive counts, then the agents at the step's end): a writer that took an
agent first (the inserting agent, or the archive's readers) while a step held the counts and waited
for that agent was a deadlock, and PostgreSQL failed one of the two (a failed turn, or a 409 "collided
with a concurrent change"). Each prompt then shows every passage of both archives: the agents are
locked in a statement before the one that reads the counts, so none reads them as they were before it
waited for a writer that committed more.

Each test holds the archives' rows in a transaction of its own so that the turns stop on the counts
with whatever they locked before them, then lets them all go at once: the interleaving that
deadlocked, every time."""

import asyncio

import pytest

from tests.support.api import create_agent
from tests.support.pg import until_waiting

ARCHIVAL = {"model": "openai/scripted-model", "tools": ["archival_memory_insert"]}


def insert_what_the_user_says(body: dict) -> dict:
    """Each turn's message is a passage to insert; after the tool's result, the turn ends."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"content": "stored"}
    return {"tool_calls": [("archival_memory_insert", {"content": last["content"], "tags": ["shared"]})]}


async def agents_reading_each_others_archives(client) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """Two agents, the one with the greater id first; each has a default archive of its own (made by a
    first insert) that the other reads too. Also the id of that first passage of each archive."""
    agents = sorted([(await create_agent(client, **ARCHIVAL))["id"] for _ in range(2)], reverse=True)
    archive_of, first_passage = {}, {}
    for agent_id in agents:
        response = await client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": "first", "tags": ["shared"]})
        [passage] = response.json()
        archive_of[agent_id], first_passage[passage["archive_id"]] = passage["archive_id"], passage["id"]
    for agent_id, other in (agents, agents[::-1]):
        assert (await client.patch(f"/v1/agents/{agent_id}/archives/attach/{archive_of[other]}")).status_code == 200
    return agents, archive_of, first_passage


class HeldArchives:
    """The archives' rows held FOR NO KEY UPDATE, as another passage write holds them, until released."""

    def __init__(self, db, archive_ids: list[str]) -> None:
        self.db, self.archive_ids, self.transaction = db, archive_ids, db.transaction()

    async def __aenter__(self) -> "HeldArchives":
        await self.transaction.start()
        await self.db.execute("SELECT 1 FROM archive WHERE id = ANY($1::text[]) FOR NO KEY UPDATE", self.archive_ids)
        return self

    async def __aexit__(self, *_) -> None:
        await self.transaction.rollback()


def send(client, agent_id: str, text: str) -> asyncio.Task:
    return asyncio.create_task(client.post(f"/v1/agents/{agent_id}/messages", json={"input": text}))


def assert_stored(response, text: str) -> None:
    assert response.status_code == 200, response.text
    returns = [m for m in response.json()["messages"] if m["message_type"] == "tool_return_message"]
    assert [m["status"] for m in returns] == ["success"], response.text  # a failed turn returns none
    assert text not in returns[0]["tool_return"]  # the passage id, not an error quoting the call


async def memories_shown(db, agent_id: str) -> int:
    prompt = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent_id)
    return next((int(line.split()[1]) for line in prompt.splitlines() if "total memories you created" in line), 0)


async def test_two_turns_inserting_into_archives_both_agents_read_both_store(client, llm, db):
    """Each turn inserts into its own agent's archive, which the other agent reads: each step ends by
    recompiling both agents. Had each step locked its own agent before the counts, each would wait at
    its end for the agent the other step held."""
    llm.respond(insert_what_the_user_says)
    agents, archive_of, _ = await agents_reading_each_others_archives(client)

    async with HeldArchives(db, list(archive_of.values())):
        turns = [send(client, agent_id, f"note of {agent_id}") for agent_id in agents]
        await until_waiting(db, turns[1], waiters=2)  # both steps wait for the counts
    responses = await asyncio.wait_for(asyncio.gather(*turns), 30)

    for agent_id, response in zip(agents, responses, strict=True):
        assert_stored(response, f"note of {agent_id}")
    for agent_id in agents:  # two archives of two passages each
        assert await memories_shown(db, agent_id) == 4


# Writes outside a turn on the other agent's side, each of which recompiles the agent whose turn runs:
# method and path (of the other agent, its archive, and that archive's first passage) and body.
REST_WRITES = {
    "insert for the agent": ("POST", "/v1/agents/{other}/archival-memory", {"text": "x"}),
    "insert into the archive": ("POST", "/v1/archives/{archive}/passages", {"text": "x"}),
    "delete the agent's passage": ("DELETE", "/v1/agents/{other}/archival-memory/{passage}", None),
    "delete from the archive": ("DELETE", "/v1/archives/{archive}/passages/{passage}", None),
    "delete the archive": ("DELETE", "/v1/archives/{archive}", None),
}


@pytest.mark.parametrize("write", REST_WRITES)
async def test_a_turns_end_of_step_recompile_and_a_write_on_the_other_agent_both_succeed(client, llm, db, write):
    """The turn's step holds its agent while it waits for its archive's counts; the write then locks
    the other agent (the inserting agent, or the lesser id of the readers) and goes for the turn's
    agent, which the step's end recompiles along with the other one."""
    llm.respond(insert_what_the_user_says)
    (turn_agent, other), archive_of, first_passage = await agents_reading_each_others_archives(client)
    method, path, body = REST_WRITES[write]
    url = path.format(other=other, archive=archive_of[other], passage=first_passage[archive_of[other]])

    async with HeldArchives(db, [archive_of[turn_agent]]):
        turn = send(client, turn_agent, "a note")
        await until_waiting(db, turn)
        rest = asyncio.create_task(client.request(method, url, json=body))
        await until_waiting(db, rest, waiters=2)  # it waits for the turn's agent, or waited for nothing
    response, answer = await asyncio.wait_for(asyncio.gather(turn, rest), 30)

    assert_stored(response, "a note")
    assert answer.status_code in (200, 204), answer.text
    counts = [await db.fetchval("SELECT count(*) FROM passage WHERE archive_id = $1", archive_of[a]) for a in (turn_agent, other)]
    for agent_id in (turn_agent, other):
        assert await memories_shown(db, agent_id) == sum(counts)


async def test_two_first_inserts_for_an_agent_at_once_make_one_archive(client, db):
    """An insert only key-share locks its agent, so two first inserts both find it without an archive;
    each then locks it to make one, and the second, reading it again under that lock, uses the first's."""
    agent_id = (await create_agent(client, **ARCHIVAL))["id"]
    held = db.transaction()
    await held.start()
    try:
        await db.execute("SELECT 1 FROM agent WHERE id = $1 FOR NO KEY UPDATE", agent_id)  # as a recompile holds it
        inserts = [
            asyncio.create_task(client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": text}))
            for text in ("one", "two")
        ]
        await until_waiting(db, inserts[1], waiters=2)  # both wait to make the archive
    finally:
        await held.rollback()
    responses = await asyncio.wait_for(asyncio.gather(*inserts), 30)

    assert [response.status_code for response in responses] == [200, 200], [response.text for response in responses]
    assert len({response.json()[0]["archive_id"] for response in responses}) == 1
    assert await db.fetchval("SELECT count(*) FROM archive") == 1
    assert await memories_shown(db, agent_id) == 2
