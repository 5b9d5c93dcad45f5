"""Test fixtures: one embedded PostgreSQL per test session, a migrated template database,
and a fresh database cloned from it for every test that needs one (full isolation, including
tests that use several connections at once)."""

import asyncio
import itertools
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import uvicorn
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.config import Settings
from memvm.db.embedded import start_embedded_postgres
from memvm.db.engine import build_engine, build_sessionmaker
from memvm.db.migrate import upgrade_to_head
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.search.embedding_queue import embed_pending
from memvm.tools.service import sync_builtin_tools
from tests.support.api import app_client, build_app
from tests.support.pg import TEMPLATE_DB, PgProxy, admin_execute, asyncpg_dsn, with_database
from tests.support.scripted_llm import ScriptedLLM
from tests.support.serve import free_port

_database_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def server_url() -> str:
    """asyncpg URL of the session's embedded server (its `postgres` database). Its data dir is
    outside pytest's private temp tree, which the server's own system user could not enter."""
    return start_embedded_postgres(Path(tempfile.mkdtemp(prefix="memvm-test-pg-")), keep_data=False)


@pytest.fixture(scope="session")
async def template_url(server_url: str) -> str:
    """Migrated, with the built-in tools and their search vectors, which every app would otherwise
    store and embed again at its start (seconds of CPU per test)."""
    await admin_execute(server_url, f"CREATE DATABASE {TEMPLATE_DB}")
    url = with_database(server_url, TEMPLATE_DB)
    engine = build_engine(url, Settings())
    await upgrade_to_head(engine)
    sessionmaker = build_sessionmaker(engine)
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        await sync_builtin_tools(session)
    while await embed_pending(sessionmaker, EmbedderRegistry()):
        pass
    await engine.dispose()
    return url


@pytest.fixture
async def database_url(server_url: str, template_url: str) -> str:
    """A fresh, migrated database for this test alone."""
    name = f"test_{next(_database_numbers)}"
    await admin_execute(server_url, f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}")
    return with_database(server_url, name)


@pytest.fixture
async def llm() -> AsyncIterator[ScriptedLLM]:
    """The scripted OpenAI-compatible model every test app talks to."""
    async with ScriptedLLM() as scripted:
        yield scripted


@pytest.fixture
def settings(database_url: str, llm: ScriptedLLM) -> Settings:
    return Settings(
        database_url=database_url,
        migrate_on_start=False,
        openai_base_url=llm.base_url,
        openai_api_key="test-key",
        llm_attempts=2,
        llm_timeout_seconds=5,
        turn_lock_timeout_seconds=5,
        embedding_poll_seconds=0.2,
    )


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(settings) as http:
        yield http


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A raw connection to the test's database, for asserting on rows directly."""
    connection = await asyncpg.connect(**asyncpg_dsn(database_url))
    yield connection
    await connection.close()


@pytest.fixture
async def proxy(server_url: str, database_url: str) -> AsyncIterator[PgProxy]:
    """A relay to the test's database that the test can cut, hold and bring back (tests/support/pg.py)."""
    relay = PgProxy(server_url, make_url(database_url).database)
    await relay.start()
    yield relay
    await relay.stop()


@pytest.fixture
async def sessionmaker(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on the test's database, for calling repository and search code directly."""
    engine = build_engine(database_url, Settings())
    yield build_sessionmaker(engine)
    await engine.dispose()


@pytest.fixture
async def live_url(settings: Settings) -> AsyncIterator[str]:
    """The app served by a real uvicorn on a loopback port, in this event loop (for tests that need
    true streaming or a client that disconnects)."""
    app = build_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.025)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await asyncio.wait_for(task, 15)
