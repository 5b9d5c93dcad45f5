"""What POST /v1/agents/ answers and stores, row by row, for the body the benchmark sends (two blocks
with limits, an llm_config and an embedding_config, the default tools): the answer is built from what
the one statement of the create returns (nothing is read back), so it is compared here with the rows
it stored, and every row with the organization of the caller."""

import httpx

from tests.loop.test_turn_round_trips import counted, quiet_client
from tests.support.api import keyed_client

LLM_CONFIG = {
    "model": "fake-gpt",
    "model_endpoint_type": "openai",
    "model_endpoint": "http://llm.test/v1",
    "context_window": 128000,
}
EMBEDDING_CONFIG = {
    "embedding_endpoint_type": "openai",
    "embedding_endpoint": "http://llm.test/v1",
    "embedding_model": "text-embedding-3-small",
    "embedding_dim": 1536,
    "embedding_chunk_size": 300,
}
BLOCKS = [
    {"label": "persona", "value": "I am a helpful benchmark agent. I keep answers short.", "limit": 20000},
    {"label": "human", "value": "The human is a load generator named Bench.", "limit": 20000},
]
BODY = {"name": "bench-1", "memory_blocks": BLOCKS, "llm_config": LLM_CONFIG, "embedding_config": EMBEDDING_CONFIG}
SHOUT = '''
def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()
'''
DEFAULT_TOOLS = ["conversation_search", "memory_replace", "memory_insert"]  # letta_v1_agent's


def stamp(value) -> str:
    """A timestamp as the API writes it."""
    return value.isoformat().replace("+00:00", "Z")


async def create(client: httpx.AsyncClient, headers: dict[str, str] | None = None, **fields) -> httpx.Response:
    return await client.post("/v1/agents/", json={**BODY, **fields}, headers=headers)


async def test_a_create_answers_with_the_rows_it_stored_in_one_statement(settings, db):
    async with quiet_client(settings) as (client, engine):
        await create(client)  # the first request of a process prepares its statements
        with counted(engine) as seen:
            response = await create(client)
        fetched = (await client.get(f"/v1/agents/{response.json()['id']}")).json()
    created = response.json()

    assert response.status_code == 200, response.text
    assert (seen.transactions, seen.statements) == (1, 1), seen.sql
    assert created == fetched
    agent = await db.fetchrow("SELECT * FROM agent WHERE id = $1", created["id"])
    assert (created["created_at"], created["updated_at"]) == (stamp(agent["created_at"]), stamp(agent["updated_at"]))
    assert (created["name"], created["agent_type"], created["system"]) == (agent["name"], "letta_v1_agent", agent["system"])
    assert created["llm_config"] == LLM_CONFIG and created["embedding_config"] == EMBEDDING_CONFIG
    assert (
        created["model"] is None
        and created["embedding"] == "openai/text-embedding-3-small"
        and created["tags"] == []
        and created["metadata"] == {}
    )
    assert created["secrets"] == [] and created["tool_rules"] == [] and created["sources"] == [] and created["identities"] == []
    assert agent["compiled_system"].startswith(agent["system"]) and BLOCKS[1]["value"] in agent["compiled_system"]
    assert agent["system_compiled_at"] is not None and agent["default_archive_id"] is None

    blocks = await db.fetch(
        "SELECT b.*, l.position FROM agent_block l JOIN block b ON b.id = l.block_id WHERE l.agent_id = $1 ORDER BY l.position",
        created["id"],
    )
    assert created["blocks"] == created["memory"]["blocks"]
    assert [(b["id"], b["label"], b["value"], b["limit"], b["version"]) for b in created["blocks"]] == [
        (row["id"], spec["label"], spec["value"], spec["limit"], 1) for row, spec in zip(blocks, BLOCKS, strict=True)
    ]
    assert [(b["created_at"], b["updated_at"]) for b in created["blocks"]] == [
        (stamp(row["created_at"]), stamp(row["updated_at"])) for row in blocks
    ]
    history = await db.fetch(
        "SELECT block_id, id, version, change, value FROM block_change WHERE block_id = any($1::text[]) ORDER BY block_id",
        [row["id"] for row in blocks],
    )
    # Each block's first change, numbered 1 within its block.
    assert [tuple(row) for row in history] == sorted((row["id"], 1, 1, "create", row["value"]) for row in blocks)

    tools = await db.fetch(
        "SELECT t.id, t.name FROM agent_tool l JOIN tool t ON t.id = l.tool_id WHERE l.agent_id = $1 ORDER BY l.position",
        created["id"],
    )
    assert [(tool["id"], tool["name"]) for tool in created["tools"]] == [tuple(row) for row in tools]
    assert [tool["name"] for tool in created["tools"]] == DEFAULT_TOOLS


async def test_every_row_of_a_create_is_its_organizations_and_a_bad_tool_stores_none(settings, db):
    async with keyed_client(settings, "a", "b") as (client, (key_a, key_b)):
        tool = (await client.post("/v1/tools/", json={"source_code": SHOUT}, headers=key_b)).json()
        in_a = (await create(client, key_a)).json()
        in_b = (await create(client, key_b, tools=["shout"], memory_blocks=BLOCKS[:1])).json()
        counts = await db.fetchval("SELECT count(*) FROM agent") + await db.fetchval("SELECT count(*) FROM block")
        not_in_a = await create(client, key_a, tools=["shout"])
        unknown_id = await create(client, key_a, tool_ids=[tool["id"]])
        from_a = await client.get(f"/v1/agents/{in_b['id']}", headers=key_a)

    assert not_in_a.status_code == 400 and unknown_id.status_code == 404 and from_a.status_code == 404
    assert counts == await db.fetchval("SELECT count(*) FROM agent") + await db.fetchval("SELECT count(*) FROM block")
    assert [t["name"] for t in in_b["tools"]] == [*DEFAULT_TOOLS, "shout"] and in_b["tools"][-1]["id"] == tool["id"]
    for agent, organization in ((in_a, "a"), (in_b, "b")):
        rows = await db.fetch(
            "SELECT organization_id FROM agent WHERE id = $1"
            " UNION ALL SELECT organization_id FROM agent_block WHERE agent_id = $1"
            " UNION ALL SELECT organization_id FROM agent_tool WHERE agent_id = $1"
            " UNION ALL SELECT organization_id FROM block WHERE id = any($2::text[])"
            " UNION ALL SELECT organization_id FROM block_change WHERE block_id = any($2::text[])",
            agent["id"],
            [block["id"] for block in agent["blocks"]],
        )
        names = {await db.fetchval("SELECT name FROM organization WHERE id = $1", row["organization_id"]) for row in rows}
        assert names == {organization}, (agent["id"], names)
        assert len(rows) == 1 + 3 * len(agent["blocks"]) + len(agent["tools"])


async def test_a_create_with_a_folder_answers_what_reading_it_back_gives(client):
    # The folder's files go into the prompt by a recompile after the row is stored, which stamps it again.
    folder = await client.post("/v1/folders/", json={"name": "docs"})
    created = await create(client, folder_ids=[folder.json()["id"]])
    fetched = await client.get(f"/v1/agents/{created.json()['id']}")

    assert created.status_code == 200, created.text
    assert created.json() == fetched.json()
    assert [source["name"] for source in created.json()["sources"]] == ["docs"]
