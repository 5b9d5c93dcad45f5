"""Engine and session factory, built from Settings by the app lifespan or the CLI."""

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, NullPool, PoolProxiedConnection

from memvm.config import Settings
from memvm.db.tenancy import TenantSession

# Sent once per connection (startup packet), so no request pays a round trip for them:
# - jit off: every statement here is short; JIT compilation only adds tens of ms to the larger plans;
# - custom plans always: asyncpg prepares every statement, and a generic plan cannot see which
#   lexeme, embedding dimension or agent it serves (it took a seq scan over a partial HNSW index's
#   table, and the wrong index for a rare lexeme); planning these statements costs well under 1 ms.
# Vector search settings are per transaction (memvm.search.archival.prefer_vector_index).
SESSION_SETTINGS = {
    "jit": "off",
    "plan_cache_mode": "force_custom_plan",
}


def build_engine(url: str, settings: Settings) -> AsyncEngine:
    engine = create_async_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        connect_args={"server_settings": SESSION_SETTINGS},
    )
    ping_idle_connections(engine, settings.db_idle_ping_seconds)
    return engine


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
    """Unpooled: closing a connection is how a session-level advisory lock is always released."""
    return create_async_engine(url, poolclass=NullPool)
