"""How many transactions and statements a turn (or an agent read) costs: each is a round trip to PostgreSQL, and on a
busy machine the round trips, not the SQL, are what a turn waits on. Counts, not timings."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
from pydantic import SecretStr
from sqlalchemy import event

from tests.support.api import build_app, create_agent

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

    event.listen(engine, "commit", on_commit)
    event.listen(engine, "before_cursor_execute", on_statement)
    try:
        yield seen
    finally:
        event.remove(engine, "commit", on_commit)
        event.remove(engine, "before_cursor_execute", on_statement)


async def test_a_two_step_turn_takes_three_transactions_and_ends_its_run_in_the_last(settings, llm):
    # Neither the embedding worker's polls nor local mode's periodic "any keys yet?" check (the
    # admin key needs no lookup) may land among the turn's statements.
    quiet = {"embedding_worker": False, "admin_api_key": SecretStr(ADMIN_KEY)}
    app = build_app(settings.model_copy(update=quiet))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://memvm.test", headers=headers, timeout=30) as client:
            agent = await create_agent(client, **MODEL)
            llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Bob", "new_string": "Robert"})])
            llm.reply("Noted, Robert.")

            with counted(app.state.sessionmaker.kw["bind"].sync_engine) as seen:
                response = await client.post(
                    f"/v1/agents/{agent['id']}/messages", json={"messages": [{"role": "user", "content": "Call me Robert"}]}
                )
            run_id = response.json()["usage"]["run_ids"][0]
            run = (await client.get(f"/v1/runs/{run_id}")).json()

    assert response.status_code == 200 and response.json()["stop_reason"]["stop_reason"] == "end_turn"
    assert seen.transactions == 3  # the start, step one (the edit and the recompile), step two and the run's end
    assert seen.statements <= 20, seen.statements
    assert run["status"] == "completed" and run["stop_reason"] == "end_turn"
    assert 0 < run["ttft_ns"] <= run["total_duration_ns"]


async def test_reading_an_agent_without_folders_reads_no_file_views(settings):
    app = build_app(settings.model_copy(update={"embedding_worker": False, "admin_api_key": SecretStr(ADMIN_KEY)}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://memvm.test", headers=headers, timeout=30) as client:
            agent = await create_agent(client, **MODEL)
            with counted(app.state.sessionmaker.kw["bind"].sync_engine) as seen:
                response = await client.get(f"/v1/agents/{agent['id']}")

    assert response.status_code == 200 and response.json()["memory"]["file_blocks"] == []
    assert [sql for sql in seen.sql if "agent_file" in sql] == []
