"""How many transactions and statements a turn (or an agent's creation or read) costs: each is a round trip to
PostgreSQL, and on a busy machine the round trips, not the SQL, are what a request waits on. Counts, not timings."""

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import SecretStr

from tests.support.api import build_app, compiled_prompt, create_agent
from tests.support.events import listening

MODEL = {"model": "openai/scripted-model"}
ADMIN_KEY = "round-trips-admin-key"


@dataclass
class RoundTrips:
    transactions: int = 0
    statements: int = 0
    sql: list[str] = field(default_factory=list)


@contextmanager
def counted(engine) -> Iterator[RoundTrips]:
    seen = RoundTrips()

    def on_commit(_connection) -> None:
        seen.transactions += 1

    def on_statement(_connection, _cursor, statement, *_args) -> None:
        seen.statements += 1
        seen.sql.append(statement)

    with listening(engine, ("commit", on_commit), ("before_cursor_execute", on_statement)):
        yield seen


@asynccontextmanager
async def quiet_client(settings) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """A client of an app, and the engine to count its statements on. Neither the embedding worker's
    polls nor local mode's periodic "any keys yet?" check (the admin key needs no lookup) may land
    among a request's statements."""
    app = build_app(settings.model_copy(update={"embedding_worker": False, "admin_api_key": SecretStr(ADMIN_KEY)}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://memvm.test", headers=headers, timeout=30) as client:
            yield client, app.state.sessionmaker.kw["bind"].sync_engine


async def test_a_two_step_turn_takes_three_transactions_and_ends_its_run_in_the_last(settings, llm):
    async with quiet_client(settings) as (client, engine):
        agent = await create_agent(client, **MODEL)
        llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Bob", "new_string": "Robert"})])
        llm.reply("Noted, Robert.")

        with counted(engine) as seen:
            response = await client.post(
                f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": "Call me Robert"}]}
            )
        run_id = response.json()["usage"]["run_ids"][0]
        run = (await client.get(f"/v1/runs/{run_id}")).json()

    assert response.status_code == 200 and response.json()["stop_reason"]["stop_reason"] == "end_turn"
    assert seen.transactions == 3  # the start, step one (the edit and the recompile), step two and the run's end
    assert seen.statements <= 13, seen.sql
    assert not [sql for sql in seen.sql if "SAVEPOINT" in sql]  # memory_replace is refused before it writes, or writes
    assert run["status"] == "completed" and run["stop_reason"] == "end_turn"
    assert 0 < run["ttft_ns"] <= run["total_duration_ns"]


async def test_reading_an_agent_without_folders_reads_no_file_views(settings):
    async with quiet_client(settings) as (client, engine):
        agent = await create_agent(client, **MODEL)
        with counted(engine) as seen:
            response = await client.get(f"/v1/agents/{agent['id']}")

    assert response.status_code == 200 and response.json()["memory"]["file_blocks"] == []
    assert [sql for sql in seen.sql if "agent_file" in sql] == []


async def test_creating_an_agent_takes_one_statement_and_answers_what_reading_it_back_gives(settings, db):
    # The agent (its prompt compiled before the INSERT), its blocks, their first versions, its
    # attachments and the built-in tools linked by name as they are looked up, in one statement:
    # nothing created is read back, not even for the answer.
    async with quiet_client(settings) as (client, engine):
        await create_agent(client, **MODEL)  # the first request of a process prepares its statements
        with counted(engine) as seen:
            created = await create_agent(client, **MODEL)
        fetched = (await client.get(f"/v1/agents/{created['id']}")).json()
        prompt = await compiled_prompt(client, created["id"])

    assert (seen.transactions, seen.statements) == (1, 1), seen.sql
    assert created == fetched
    assert [block["label"] for block in created["memory"]["blocks"]] == ["human", "persona"]
    # The prompt stored with the row is what a recompile at the same timestamp makes of it.
    assert await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", created["id"]) == prompt
    assert "Name: Bob" in prompt and "I am Sam." in prompt


async def test_reading_an_agent_reads_only_the_relations_it_has(settings, llm):
    # The agent row says whether it has folders, identities and runs, and comes with its blocks (one
    # statement); its tools are read.
    async with quiet_client(settings) as (client, engine):
        agent = await create_agent(client, **MODEL)
        with counted(engine) as fresh:
            before = (await client.get(f"/v1/agents/{agent['id']}")).json()
        llm.reply("Hello.")
        sent = await client.post(f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": "Hi"}]})
        with counted(engine) as with_run:
            after = (await client.get(f"/v1/agents/{agent['id']}")).json()

    assert sent.status_code == 200, sent.text
    assert fresh.statements == 2, fresh.sql
    assert with_run.statements == 3, with_run.sql  # and its latest run
    assert before["last_stop_reason"] is None and after["last_stop_reason"] == "end_turn"
    assert after["last_run_completion"] is not None


async def test_reading_an_agent_without_blocks_takes_as_many_statements_and_answers_as_creating_it(settings):
    # Its row comes alone (no block joined to it), and still with its links.
    async with quiet_client(settings) as (client, engine):
        created = await create_agent(client, memory_blocks=[], **MODEL)
        with counted(engine) as seen:
            fetched = (await client.get(f"/v1/agents/{created['id']}")).json()

    assert seen.statements == 2, seen.sql
    assert fetched == created and fetched["memory"]["blocks"] == []


async def test_attaching_and_detaching_a_block_lock_the_agent_once_and_read_its_blocks_once(settings, db):
    # Block locked; agent locked with its counts, its passages' tags and its links; its blocks; the
    # link written with its new prompt, and its tools read, in one statement. The view reuses the
    # blocks and tools those read and skips the relations it has none of. Detaching takes no block lock.
    async with quiet_client(settings) as (client, engine):
        agent = await create_agent(client, **MODEL)
        passage = {"text": "Bob drinks tea at noon.", "tags": ["habits"]}
        assert (await client.post(f"/v1/agents/{agent['id']}/archival-memory", json=passage)).status_code == 200
        block = (await client.post("/v1/blocks/", json={"label": "notes", "value": "Likes tea."})).json()
        url = f"/v1/agents/{agent['id']}/core-memory/blocks"
        with counted(engine) as attaching:
            attached = await client.patch(f"{url}/attach/{block['id']}")
        with_block = (await client.get(f"/v1/agents/{agent['id']}")).json()
        prompt_with = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])
        with counted(engine) as detaching:
            detached = await client.patch(f"{url}/detach/{block['id']}")
        without_block = (await client.get(f"/v1/agents/{agent['id']}")).json()
        prompt_without = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])
        recompiled = await compiled_prompt(client, agent["id"])

    assert (attaching.transactions, attaching.statements) == (1, 4), attaching.sql
    assert (detaching.transactions, detaching.statements) == (1, 3), detaching.sql
    assert attached.json() == with_block and detached.json() == without_block
    assert [b["label"] for b in with_block["memory"]["blocks"]] == ["human", "persona", "notes"]
    assert "Likes tea." in prompt_with and "Likes tea." not in prompt_without
    assert "habits" in prompt_with and "habits" in prompt_without
    # What was stored is what a recompile at the same timestamp makes of the agent.
    assert prompt_without == recompiled


async def test_listing_agents_reads_only_the_relations_some_listed_agent_has(settings, llm):
    # The listing's rows say which agents have folders, identities and runs: none here but one run.
    async with quiet_client(settings) as (client, engine):
        first = await create_agent(client, **MODEL)
        await create_agent(client, **MODEL)
        with counted(engine) as fresh:
            before = (await client.get("/v1/agents/")).json()
        llm.reply("Hello.")
        sent = await client.post(f"/v1/agents/{first['id']}/messages", json={"messages": [{"role": "user", "content": "Hi"}]})
        with counted(engine) as with_run:
            after = (await client.get("/v1/agents/")).json()
        one_by_one = [(await client.get(f"/v1/agents/{agent['id']}")).json() for agent in after]

    assert sent.status_code == 200, sent.text
    assert fresh.statements == 3, fresh.sql  # the agents, their blocks, their tools
    assert with_run.statements == 4, with_run.sql  # and the latest runs
    assert len(before) == 2 and after == one_by_one
    assert [agent["last_stop_reason"] for agent in after if agent["id"] == first["id"]] == ["end_turn"]
