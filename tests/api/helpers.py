"""Small request helpers shared by API tests."""

import httpx


async def create_agent(client: httpx.AsyncClient, **fields) -> dict:
    body = {"memory_blocks": [{"label": "human", "value": "Name: Bob"}, {"label": "persona", "value": "I am Sam."}]}
    body.update(fields)
    response = await client.post("/v1/agents/", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def create_block(client: httpx.AsyncClient, **fields) -> dict:
    body = {"label": "notes", "value": "shared notes"}
    body.update(fields)
    response = await client.post("/v1/blocks/", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def compiled_prompt(client: httpx.AsyncClient, agent_id: str) -> str:
    """The stored prompt: a dry run that keeps the stored timestamp equals what is stored."""
    response = await client.post(f"/v1/agents/{agent_id}/recompile", params={"dry_run": "true"})
    assert response.status_code == 200, response.text
    return response.json()


async def table_counts(db) -> dict[str, int]:
    return {table: await db.fetchval(f"SELECT count(*) FROM {table}") for table in ("agent", "block", "agent_block", "block_change")}
