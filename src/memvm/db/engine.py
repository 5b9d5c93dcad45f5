"""Engine and session factory, built from Settings by the app lifespan or the CLI."""

import asyncio
import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Dialect, ExceptionContext
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, NullPool, PoolProxiedConnection

from memvm.config import Settings
from memvm.db.tenancy import TenantSession
from memvm.db.vectors import send_vectors_in_binary

# Sent once per connection (startup packet), so no request pays a round trip for them:
# - jit off: every statement here is short; JIT compilation only adds tens of ms to the larger plans;
# - custom plans always: asyncpg prepares every statement, and a generic plan cannot see which
#   lexeme, embedding dimension or agent it serves (it took a seq scan over a partial HNSW index's
#   table, and the wrong index for a rare lexeme); planning these statements costs well under 1 ms.
# Vector search settings are per transaction (memvm.search.vector_index.prefer_vector_index).
SESSION_SETTINGS = {
    "jit": "off",
    "plan_cache_mode": "force_custom_plan",
}


def build_engine(url: str, settings: Settings) -> AsyncEngine:
    engine = create_async_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout=settings.db_pool_timeout_seconds,
        connect_args={"server_settings": SESSION_SETTINGS},
    )
    report_unreachable_as_disconnect(engine)
    refuse_connections_the_server_ended(engine)
    ping_idle_connections(engine, settings.db_idle_ping_seconds)
    send_vectors_in_binary(engine)
    return engine


# SQLSTATEs that say the server is going or gone: class 08 (connection exception: asyncpg's
# "connection was closed in the middle of operation" is 08003), admin shutdown (`pg_ctl stop`),
# crash shutdown, and "the database system is starting up / shutting down" while connecting.
_UNREACHABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03")


def report_unreachable_as_disconnect(engine: AsyncEngine) -> None:
    """A database that cannot be reached (stopped, restarting, not up yet) fails the statement with a
    DBAPIError whose `connection_invalidated` is set, like a pooled connection it dropped: the request
    gets 503 with retry-after (api/errors.py) and the pool is renewed, never a 500.

    Without this, a failed connect is either asyncpg's raw OSError (no socket, refused, reset, timed
    out), which SQLAlchemy passes through unwrapped, or a DBAPIError not marked as a disconnect
    ("the database system is shutting down"); the dialect only recognises a connection it saw close."""

    @event.listens_for(engine.sync_engine, "do_connect")
    def connect(dialect: Dialect, record: ConnectionPoolEntry, cargs: Any, cparams: Any) -> Any:
        try:
            return dialect.connect(*cargs, **cparams)
        except OSError as error:  # TimeoutError included
            raise dialect.loaded_dbapi.OperationalError(f"cannot connect to the database: {error!r}", error) from error

    @event.listens_for(engine.sync_engine, "handle_error")
    def mark_disconnect(context: ExceptionContext) -> None:
        error = context.original_exception
        sqlstate = getattr(error, "sqlstate", None) or ""
        if sqlstate.startswith(_UNREACHABLE_SQLSTATES) or isinstance(error.__cause__, OSError):
            context.is_disconnect = True


def database_unreachable(error: BaseException) -> bool:
    """Whether `error` is the database going away (see report_unreachable_as_disconnect): worth a retry."""
    return isinstance(error, DBAPIError) and error.connection_invalidated


class _PooledWatch(asyncio.Protocol):
    """Stands between an asyncpg connection's transport and its protocol, passing everything on, and
    notes whether the server said anything while the connection sat in the pool. An idle session is
    only spoken to when the server ends it: a FATAL error (shutdown, pg_terminate_backend, an idle
    timeout), then the close. asyncpg takes a FATAL that answers no query for the start of an
    operation, so until the close arrives the connection looks open, and its next statement fails
    with "another operation (2) is in progress"."""

    def __init__(self, inner: asyncio.Protocol) -> None:
        self._inner = inner
        self.pooled = False
        self.spoken_to = False

    def data_received(self, data: bytes) -> None:
        self.spoken_to = self.spoken_to or self.pooled
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


def refuse_connections_the_server_ended(engine: AsyncEngine) -> None:
    """A pooled connection the server has ended is replaced when it is checked out, with no round
    trip: its close has arrived, or anything else has (a FATAL error before its close). Without this
    the request that drew it failed with 503 although the database was up (terminated backends, idle
    timeouts) or, during a shutdown, with asyncpg's misleading "another operation is in progress"."""

    @event.listens_for(engine.sync_engine, "connect")
    def watch(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # asyncpg offers no hook for what arrives between queries; its transport takes another protocol.
        transport = dbapi_connection.driver_connection._transport
        record.info["watch"] = _PooledWatch(transport.get_protocol())
        transport.set_protocol(record.info["watch"])

    @event.listens_for(engine.sync_engine, "checkin")
    def pooled(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        if "watch" in record.info:
            record.info["watch"].pooled = True

    @event.listens_for(engine.sync_engine, "checkout")
    def refuse_if_ended(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection) -> None:
        watch = record.info["watch"]
        if watch.spoken_to or dbapi_connection.driver_connection.is_closed():
            raise DisconnectionError("the server ended this pooled connection")
        watch.pooled = False


def ping_idle_connections(engine: AsyncEngine, idle_seconds: float) -> None:
    """pool_pre_ping, but only for connections that sat idle: a database restart or an idle timeout
    then costs no failed request, while a busy server skips the ping's round trips. A failed ping
    makes the pool replace the connection (DisconnectionError)."""

    @event.listens_for(engine.sync_engine, "checkin")
    def remember_idle_since(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def ping_if_idle(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < idle_seconds:
            return  # new, or used a moment ago
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc


def build_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, sync_session_class=TenantSession)


def build_lock_engine(url: str) -> AsyncEngine:
    """Unpooled, for connections held as long as what they hold (a run's claim, LISTEN): closing one
    is how its session-level advisory lock is always released."""
    engine = create_async_engine(url, poolclass=NullPool)
    report_unreachable_as_disconnect(engine)
    return engine


def build_turn_lock_engine(url: str, settings: Settings) -> AsyncEngine:
    """Pooled and autocommit, for the agents' turn locks: a new PostgreSQL connection cost a turn
    8 ms against 1 ms for the lock itself. runtime/loop/turn_lock.py releases a turn's lock before it
    hands the connection back, and discards a connection it could not release.

    Bounded: a turn holds its connection from before its first session connection to after its last,
    so db_turn_lock_pool_size is how many turns a process runs at once, and further sends queue for a
    connection (runtime/loop/turn_lock.py says why that wait cannot deadlock)."""
    engine = create_async_engine(
        url,
        pool_size=settings.db_turn_lock_pool_size,
        max_overflow=0,
        pool_timeout=settings.db_pool_timeout_seconds,
        isolation_level="AUTOCOMMIT",
    )
    report_unreachable_as_disconnect(engine)
    refuse_connections_the_server_ended(engine)
    ping_idle_connections(engine, settings.db_idle_ping_seconds)
    return engine
