"""Engine and session factory, built from Settings by the app lifespan or the CLI."""

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool

from memvm.config import Settings


def build_engine(url: str, settings: Settings) -> AsyncEngine:
    return create_async_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_pre_ping=True,
    )


def build_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


def build_lock_engine(url: str) -> AsyncEngine:
    """Unpooled: closing a connection is how a session-level advisory lock is always released."""
    return create_async_engine(url, poolclass=NullPool)
