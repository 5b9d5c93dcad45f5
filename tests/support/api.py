"""The app under test, and small request helpers shared by tests that speak HTTP to it."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from pydantic import SecretStr

from memvm.config import Settings
from memvm.db.database import DatabaseTarget
from memvm.main import create_app


def build_app(settings: Settings) -> FastAPI:
    """The app on the test's database, its target already resolved (as `memvm serve` does before logging it)."""
    return create_app(settings, database=DatabaseTarget(settings.database_url, "test database"))


@asynccontextmanager
async def started_app_client(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A started app (lifespan run) built from `settings`, and an httpx client on it: a test may
    swap what the lifespan put on app.state (api/deps.py's dependencies read it per request)."""
    app = build_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvm.test", timeout=30) as http:
            yield app, http


@asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on a started app built from `settings`."""
    async with started_app_client(settings) as (_, http):
        yield http


TEST_ADMIN_KEY = "admin-secret-for-tests"


@asynccontextmanager
async def keyed_client(settings: Settings, *organizations: str) -> AsyncIterator[tuple[httpx.AsyncClient, list[dict[str, str]]]]:
    """The app with access control on (an admin key), and a key of each organization, as request headers."""
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(TEST_ADMIN_KEY)})) as client:
        yield client, await organization_keys(client, TEST_ADMIN_KEY, *organizations)


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
    return {
        table: await db.fetchval(f"SELECT count(*) FROM {table}") for table in ("agent", "block", "agent_block", "block_change")
    }


async def organization_keys(client: httpx.AsyncClient, admin_key: str, *organizations: str) -> list[dict[str, str]]:
    """A new key of each organization (made with the admin key), as request headers."""
    keys = []
    for organization in organizations:
        created = await client.post(
            "/v1/admin/api-keys", json={"organization": organization}, headers={"Authorization": f"Bearer {admin_key}"}
        )
        assert created.status_code == 200, created.text
        keys.append({"Authorization": f"Bearer {created.json()['key']}"})
    return keys
