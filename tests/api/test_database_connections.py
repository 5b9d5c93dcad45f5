"""Pooled connections: the server's per-connection settings, and connections the database dropped."""

import asyncio

from sqlalchemy import text

from memvm.config import Settings
from memvm.db.engine import SESSION_SETTINGS, build_engine
from tests.support.api import app_client

TERMINATE_OTHERS = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


async def test_every_pooled_connection_carries_the_session_settings(database_url):
    engine = build_engine(database_url, Settings())
    try:
        async with engine.connect() as connection:
            for name, value in SESSION_SETTINGS.items():
                assert (await connection.execute(text("SELECT current_setting(:n)"), {"n": name})).scalar() == value
    finally:
        await engine.dispose()


async def kill_pool_then_request(settings: Settings, db) -> list[int]:
    async with app_client(settings) as client:
        assert (await client.get("/v1/agents/")).status_code == 200
        assert await db.fetchval(TERMINATE_OTHERS) >= 1
        await asyncio.sleep(0.3)
        return [(await client.get("/v1/agents/")).status_code for _ in range(2)]


async def test_an_idle_connection_the_database_dropped_is_replaced_before_use(settings, db):
    settings = settings.model_copy(update={"db_idle_ping_seconds": 0.1, "embedding_worker": False})
    assert await kill_pool_then_request(settings, db) == [200, 200]


async def test_a_dropped_connection_used_without_a_ping_fails_one_request_with_503(settings, db):
    settings = settings.model_copy(update={"db_idle_ping_seconds": 3600, "embedding_worker": False})
    assert await kill_pool_then_request(settings, db) == [503, 200]
