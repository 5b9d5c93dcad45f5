"""Every statement a request sends that reads, changes or deletes rows of a tenant table names the
organization of that table in its conditions. The tables' keys start with organization_id
(tests/db/test_citus_ready.py): a row located by its id alone is a skip scan over every
organization's part of the index on PostgreSQL, and a statement on every shard under Citus
(docs/scale-out.md). The session's tenancy filter (db/tenancy.py) scopes ORM queries, but the ORM
also writes rows back, deletes them, refreshes them and loads their deferred columns by the mapper's
key, past that filter; so the test records what reaches the database rather than reading the code."""

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import Engine

from memvm.config import Settings
from tests.db.test_citus_ready import REFERENCE_TABLES, TENANT_KEY
from tests.support.api import app_client, create_agent, create_block
from tests.support.events import listening

MODEL = {"model": "openai/scripted-model", "tools": ["archival_memory_insert", "memory_replace"]}
# A table a statement reads or changes, and its alias if it has one.
TABLE = re.compile(r"\b(?:FROM|JOIN|UPDATE)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?", re.IGNORECASE)
NOT_AN_ALIAS = {"WHERE", "ON", "SET", "JOIN", "LEFT", "INNER", "CROSS", "ORDER", "GROUP", "LIMIT", "RETURNING", "FOR"}


@contextmanager
def recorded_statements() -> Iterator[list[str]]:
    """The SQL every engine of this process sends while the block runs."""
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    with listening(Engine, ("before_cursor_execute", record)):
        yield statements


def unscoped(statement: str, tenant_tables: set[str]) -> list[str]:
    """The tenant tables the statement reads or changes without a condition on their organization_id
    (in the select list it scopes nothing)."""
    missing = []
    for table in TABLE.finditer(statement):
        if table[1] not in tenant_tables:
            continue
        name = table[2] if table[2] and table[2].upper() not in NOT_AN_ALIAS else table[1]
        column = rf"\b{name}\.{TENANT_KEY}\b"
        if not re.search(rf"{column}\s*(?:=|IN\b)|=\s*{column}|\(\s*{column}\s*,", statement):
            missing.append(table[1])
    return missing


@pytest.fixture
async def client(settings: Settings) -> Any:
    # No embedding worker: it looks for work across organizations on purpose (docs/scale-out.md, known
    # gaps); its claims, one organization each, are tests/search/test_embedding_queue.py's.
    async with app_client(settings.model_copy(update={"embedding_worker": False})) as http:
        yield http


async def ok(response: httpx.Response) -> Any:
    assert response.is_success, response.text
    return response.json() if response.content else None


async def finished(client: httpx.AsyncClient, run_id: str) -> None:
    for _ in range(400):
        if (await ok(await client.get(f"/v1/runs/{run_id}")))["status"] not in ("created", "running"):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


async def representative_writes(client: httpx.AsyncClient, llm: Any) -> None:
    """Block, agent, passage, step, archive and run writes, turns that edit memory, and deletions."""
    agent = await create_agent(client, **MODEL)
    shared = await create_block(client)
    await ok(await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/human", json={"value": "Name: Robert"}))
    await ok(await client.patch(f"/v1/blocks/{shared['id']}", json={"value": "still shared"}))
    await ok(await client.patch(f"/v1/agents/{agent['id']}", json={"description": "renamed", "block_ids": [shared["id"]]}))
    memory = await ok(await client.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": "my garden"}))
    await ok(await client.delete(f"/v1/agents/{agent['id']}/archival-memory/{memory[0]['id']}"))
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Robert", "new_string": "Bob"})]).reply("Noted.")
    turn = await ok(await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "call me Bob"}))
    run_id = turn["messages"][-1]["run_id"]
    step = (await ok(await client.get(f"/v1/runs/{run_id}/steps")))[0]
    await ok(await client.patch(f"/v1/steps/{step['id']}/feedback", json={"feedback": "positive"}))
    llm.reply("Later.")
    await finished(client, (await ok(await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "hi"})))["id"])
    archive = await ok(await client.post("/v1/archives/", json={"name": "notes"}))
    await ok(await client.patch(f"/v1/archives/{archive['id']}", json={"name": "garden notes"}))
    await ok(await client.delete(f"/v1/archives/{archive['id']}"))
    await ok(await client.delete(f"/v1/runs/{run_id}"))
    await ok(await client.delete(f"/v1/agents/{agent['id']}"))
    await ok(await client.delete(f"/v1/blocks/{shared['id']}"))


async def test_every_statement_on_a_tenant_table_names_the_organization(client, llm, db: asyncpg.Connection):
    columns = await db.fetch("SELECT table_name FROM information_schema.columns WHERE column_name = $1", TENANT_KEY)
    tenant_tables = {row["table_name"] for row in columns} - REFERENCE_TABLES.keys()

    with recorded_statements() as statements:
        await representative_writes(client, llm)

    writes = [s for s in statements if re.match(r"\s*(UPDATE|DELETE)\b", s)]
    assert len(writes) >= 10, writes  # the walk above really wrote (flushes, deletes, the turns' runs)
    assert [(s, tables) for s in statements if (tables := unscoped(s, tenant_tables))] == []
