"""URL and admin helpers for the tests' PostgreSQL."""

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import asyncpg
from alembic import command
from sqlalchemy import Connection
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from memvm.db.migrate import alembic_config

# The migrated database every test database is cloned from (CREATE DATABASE ... TEMPLATE).
TEMPLATE_DB = "memvm_template"
_CHUNK = 65536


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


def asyncpg_dsn(url: str) -> dict:
    parsed = make_url(url)
    return {"user": parsed.username, "database": parsed.database, "host": parsed.query.get("host") or parsed.host}


async def admin_execute(server_url: str, sql: str) -> None:
    """Run one statement (CREATE/DROP DATABASE) on the server's admin database, on a connection of its own."""
    admin = await asyncpg.connect(**asyncpg_dsn(server_url))
    try:
        await admin.execute(sql)
    finally:
        await admin.close()


class PgProxy:
    """A unix-socket relay in front of the test server, which a test can take down and bring back:
    the database going away (every connection cut, the socket gone) without stopping the server
    that every other test shares. `url` is `server_url`'s database through the relay."""

    def __init__(self, server_url: str, database: str) -> None:
        parsed = make_url(server_url)
        port = parsed.port or 5432
        self._target = f"{parsed.query['host']}/.s.PGSQL.{port}"
        self._dir = tempfile.mkdtemp(prefix="memvm-pgproxy-")
        self._socket = f"{self._dir}/.s.PGSQL.{port}"
        self.url = make_url(with_database(server_url, database)).update_query_dict({"host": self._dir}).render_as_string(False)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._held_closes: asyncio.Event | None = None
        self._client_bytes_before_hold: int | None = None
        self._held_client_writes = asyncio.Event()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._relay, self._socket)

    def hold_server_closes(self) -> None:
        """From now on a connection the server closes stays open towards the client, which gets what the
        server sent before closing (a FATAL error) but not the close, until stop(): the moment between
        the two, held open."""
        self._held_closes = asyncio.Event()

    def hold_client_writes(self, after_bytes: int) -> None:
        """Once clients have sent `after_bytes` more bytes, the relay stops reading what they send,
        until stop(): a database that stalls mid-statement. What a client writes then backs up, in the
        kernel and then in its own transport, which pauses its writing."""
        self._client_bytes_before_hold = after_bytes

    async def stop(self) -> None:
        """Refuse new connections (the socket is removed) and cut the open ones."""
        assert self._server is not None
        if self._held_closes is not None:
            self._held_closes.set()
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._client_bytes_before_hold = None
        self._held_client_writes.set()  # the held relays end: their connections are cut
        self._held_client_writes = asyncio.Event()
        await self._server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._socket)

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_unix_connection(self._target)
        self._writers |= {client_writer, server_writer}

        async def pipe(read: Callable[[], Awaitable[bytes]], writer: asyncio.StreamWriter) -> None:
            try:
                while data := await read():
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                if writer is client_writer and self._held_closes is not None:
                    await self._held_closes.wait()
                writer.transport.abort()

        try:
            await asyncio.gather(
                pipe(lambda: self._read_from_client(client_reader), server_writer),
                pipe(lambda: server_reader.read(_CHUNK), client_writer),
            )
        finally:
            self._writers -= {client_writer, server_writer}

    async def _read_from_client(self, reader: asyncio.StreamReader) -> bytes:
        """The next chunk a client sent; once hold_client_writes' budget is spent, nothing more until
        stop() ends the connection."""
        left = self._client_bytes_before_hold
        if left is None:
            return await reader.read(_CHUNK)
        if left == 0:
            await self._held_client_writes.wait()
            raise ConnectionResetError("the relay was stopped")
        data = await reader.read(min(_CHUNK, left))
        if self._client_bytes_before_hold is not None:  # not stopped meanwhile
            self._client_bytes_before_hold -= len(data)
        return data


async def until_waiting(db: asyncpg.Connection, task: asyncio.Task, waiters: int = 1) -> None:
    """Until `waiters` transactions wait for a lock (or the task is done: it waited for nothing)."""
    for _ in range(500):
        if task.done() or await db.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted") >= waiters:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{waiters} transactions never waited for a lock")


async def migrate_to(url: str, revision: str, *, down: bool = False) -> None:
    """Upgrade the database at `url` to an Alembic revision (tests that start from an older schema),
    or with `down` downgrade it to one."""

    def migrate(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)

    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(migrate)
    finally:
        await engine.dispose()


@asynccontextmanager
async def database_at(server_url: str, name: str, revision: str) -> AsyncIterator[tuple[str, asyncpg.Connection]]:
    """A new database migrated to `revision`, and a connection to it; both gone afterwards."""
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    url = with_database(server_url, name)
    await migrate_to(url, revision)
    db = await asyncpg.connect(**asyncpg_dsn(url))
    try:
        yield url, db
    finally:
        await db.close()
        await admin_execute(server_url, f"DROP DATABASE {name} WITH (FORCE)")


def next_seq(agent: str) -> str:
    """SQL for the seq of a message written next to the default conversation of the agent whose id
    is the SQL `agent` (a parameter or column), for tests that write messages without memvm."""
    default_conversation = f"m.agent_id = {agent}::varchar AND m.conversation_id IS NULL"
    return f"(SELECT coalesce(max(m.seq), 0) + 1 FROM message AS m WHERE {default_conversation})"
