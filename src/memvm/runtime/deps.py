"""What the runtime needs from the application, built once in the lifespan."""

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memvm.config import Settings
from memvm.runtime.models import ModelSource


@dataclass(frozen=True)
class RuntimeDeps:
    sessionmaker: async_sessionmaker[AsyncSession]
    lock_engine: AsyncEngine
    models: ModelSource
    settings: Settings
