"""Pooled connections: the server's per-connection settings, connections the database dropped, and a
database that cannot be reached at all."""

import asyncio
import uuid

import httpx
import pytest
from sqlalchemy import make_url, text
from sqlalchemy.exc import DBAPIError

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.config import Settings
from memvm.db.engine import SESSION_SETTINGS, build_engine, build_lock_engine, build_sessionmaker, database_unreachable
from memvm.db.uow import transaction
from tests.support.api import app_client, build_app

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


@pytest.mark.parametrize("idle_ping_seconds", [0.1, 3600], ids=["pinged", "closed"])
async def test_an_idle_connection_the_database_dropped_is_replaced_before_use(settings, db, idle_ping_seconds):
    """Pinged after sitting idle, or (no ping yet) seen closed at checkout: either way no request fails."""
    settings = settings.model_copy(update={"db_idle_ping_seconds": idle_ping_seconds, "embedding_worker": False})
    assert await kill_pool_then_request(settings, db) == [200, 200]


async def backend_pid(sessionmaker) -> int:
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        return (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()


async def test_a_pooled_connection_the_server_ended_is_replaced_before_its_close_arrives(proxy, db):
    """The server ends an idle session with a FATAL error, then closes it. Between the two the
    connection looks open; asyncpg took the FATAL for the start of an operation, so handing it out
    failed the next statement with "another operation (2) is in progress" (a 503 under load)."""
    engine = build_engine(proxy.url, Settings(db_idle_ping_seconds=3600))  # no ping: the check must cost nothing
    sessionmaker = build_sessionmaker(engine)
    try:
        ended = await backend_pid(sessionmaker)
        proxy.hold_server_closes()
        assert await db.fetchval("SELECT pg_terminate_backend($1)", ended)  # FATAL 57P01, then the close
        await asyncio.sleep(0.3)  # the FATAL has arrived; the close is held back
        replacement = await backend_pid(sessionmaker)
    finally:
        await proxy.stop()  # lets the held closes through: closing the pool waits for them
        await engine.dispose()

    assert replacement != ended


@pytest.mark.parametrize("unpooled", [False, True], ids=["pooled", "lock engine"])
async def test_connecting_to_a_database_that_is_gone_fails_as_a_disconnect(proxy, unpooled):
    engine = build_lock_engine(proxy.url) if unpooled else build_engine(proxy.url, Settings())
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT 1"))).scalar() == 1
        await engine.dispose()  # no pooled connection left: the next statement must connect
        await proxy.stop()  # the socket is gone: asyncpg raises FileNotFoundError, not a DBAPI error
        with pytest.raises(DBAPIError) as raised:
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        assert raised.value.connection_invalidated and database_unreachable(raised.value)
    finally:
        await engine.dispose()
        await proxy.start()


async def test_requests_while_the_database_is_unreachable_get_503_then_work_again(settings, proxy):
    settings = settings.model_copy(update={"database_url": proxy.url, "embedding_worker": False})
    async with app_client(settings) as client:
        agent = (await client.post("/v1/agents/", json={"memory_blocks": [{"label": "human", "value": "Bob"}]})).json()
        await proxy.stop()
        gone = [await client.get(path) for path in ("/v1/agents/", f"/v1/agents/{agent['id']}", "/v1/blocks/")]
        await proxy.start()
        back = [(await client.get(path)).status_code for path in ("/v1/agents/", f"/v1/agents/{agent['id']}")]
    assert [(r.status_code, r.headers.get("retry-after")) for r in gone] == [(503, "1")] * 3
    assert back == [200, 200]


async def test_a_background_run_whose_database_went_away_ends_once_it_is_back(settings, proxy, llm):
    """Its turn cannot store its step, nor its own end, while the database is gone: the run must not
    stay `running` (a client polling it would wait forever); nothing of the step is stored."""
    settings = settings.model_copy(update={"database_url": proxy.url, "embedding_worker": False})
    llm.reply("too late", delay=1.0).reply("back again")
    async with app_client(settings) as client:
        agent = (await client.post("/v1/agents/", json={"model": "openai/scripted-model"})).json()
        run_id = (await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "hi"})).json()["id"]
        while not llm.requests:  # the turn waits on the model
            await asyncio.sleep(0.02)
        await proxy.stop()
        await asyncio.sleep(1.5)  # the model answers; the step, then the run's end, cannot be stored
        await proxy.start()
        for _ in range(100):
            response = await client.get(f"/v1/runs/{run_id}")
            if response.status_code == 200 and response.json()["status"] not in ("created", "running"):
                break
            await asyncio.sleep(0.1)
        run = response.json()
        history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc"})).json()
        after = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "again"})).json()

    assert run["status"] == "failed" and run["stop_reason"] == "error"
    assert history == []  # the step (the input with the answer) was never stored
    assert after["stop_reason"]["stop_reason"] == "end_turn" and after["messages"][-1]["content"] == "back again"


async def test_a_turn_whose_lock_the_database_dropped_stores_nothing_more(settings, proxy, llm, db):
    """The turn lock lives on a connection: when the database drops it mid-turn, another turn of the
    agent may take the lock, so the first turn must not store its step (one turn at a time)."""
    settings = settings.model_copy(update={"database_url": proxy.url, "embedding_worker": False})
    llm.reply("first, too late", delay=2.0).reply("second")
    async with app_client(settings) as client:
        agent = (await client.post("/v1/agents/", json={"model": "openai/scripted-model"})).json()
        send = f"/v1/agents/{agent['id']}/messages"
        first = asyncio.create_task(client.post(send, json={"input": "one"}))
        while not llm.requests:  # the first turn waits on the model, holding the lock
            await asyncio.sleep(0.02)
        await proxy.stop()
        await asyncio.sleep(0.3)
        await proxy.start()
        second = await client.post(send, json={"input": "two"})
        if second.status_code == 503:  # a pooled connection from before the cut
            second = await client.post(send, json={"input": "two"})
        first = await first
        history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc"})).json()

    assert second.json()["stop_reason"]["stop_reason"] == "end_turn"
    assert first.status_code == 200 and first.json()["stop_reason"]["stop_reason"] == "error"
    assert [(m["message_type"], m["content"]) for m in history] == [("user_message", "two"), ("assistant_message", "second")]
    runs = [tuple(r) for r in await db.fetch("SELECT status, stop_reason FROM run ORDER BY created_at")]
    assert runs == [("failed", "error"), ("completed", "end_turn")]


async def test_a_database_with_no_free_connection_gets_503_not_500(settings, db):
    """PostgreSQL refuses a new connection past max_connections, or past its role's limit, with
    SQLSTATE 53300 (too_many_connections): many replicas' pools together can reach it under load. The
    requests that need a new connection then get 503 with retry-after, never a 500."""
    role = f"crowded_{uuid.uuid4().hex[:8]}"
    await db.execute(f"CREATE ROLE {role} LOGIN IN ROLE postgres")  # superusers have no connection limit
    try:
        url = make_url(settings.database_url).set(username=role).render_as_string(hide_password=False)
        settings = settings.model_copy(update={"database_url": url, "embedding_worker": False})
        async with app_client(settings) as client:
            assert (await client.get("/v1/agents/")).status_code == 200
            await db.execute(f"ALTER ROLE {role} CONNECTION LIMIT 0")
            await db.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
            await asyncio.sleep(0.3)  # the pool sees its connections closed and must open new ones
            responses = [await client.get("/v1/agents/") for _ in range(2)]
    finally:
        await db.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        await db.execute(f"DROP ROLE {role}")
    assert [(r.status_code, r.headers.get("retry-after")) for r in responses] == [(503, "1")] * 2
    assert "no free connection" in responses[0].json()["detail"]


async def test_a_request_that_finds_every_pooled_connection_busy_gets_503_not_500(settings):
    """The session pool is bounded (MEMVM_DB_POOL_SIZE + MEMVM_DB_MAX_OVERFLOW): a request waits for a
    connection, and one that waits longer than MEMVM_DB_POOL_TIMEOUT_SECONDS is told to retry."""
    settings = settings.model_copy(
        update={"db_pool_size": 1, "db_max_overflow": 0, "db_pool_timeout_seconds": 0.3, "embedding_worker": False}
    )
    app = build_app(settings)
    async with app.router.lifespan_context(app), app.state.sessionmaker() as holding_the_only_connection:
        await holding_the_only_connection.execute(text("SELECT 1"))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memvm.test") as client:
            answer = await client.get("/v1/agents/")

    assert (answer.status_code, answer.headers.get("retry-after")) == (503, "1")
    assert "MEMVM_DB_POOL_SIZE" in answer.json()["detail"]
