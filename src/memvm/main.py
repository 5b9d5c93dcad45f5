"""create_app(settings): the FastAPI application, its lifespan resources, routers and error handlers."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from memvm import __version__
from memvm.api import agents, blocks, core_memory, errors, health
from memvm.config import Settings
from memvm.db.database import DatabaseTarget, resolve_database
from memvm.db.engine import build_engine, build_sessionmaker
from memvm.db.migrate import upgrade_to_head

log = logging.getLogger("memvm")


def create_app(settings: Settings, *, database: DatabaseTarget | None = None) -> FastAPI:
    """`database` is the already resolved server (the CLI resolves it first so it can log it);
    without it the lifespan resolves one from settings."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        target = database or resolve_database(settings)
        engine = build_engine(target.url, settings)
        try:
            if settings.migrate_on_start:
                plan = await upgrade_to_head(engine)
                if not plan.up_to_date:
                    log.info("database migrated %s → %s", plan.current or "empty", plan.target)
            app.state.sessionmaker = build_sessionmaker(engine)
            yield
        finally:
            await engine.dispose()

    app = FastAPI(
        title="memvm",
        version=__version__,
        description="Stateful LLM agents with self-editing memory, over the Letta v1 REST API.",
        lifespan=lifespan,
    )
    errors.install(app)
    for module in (health, agents, core_memory, blocks):
        app.include_router(module.router)
    return app
