"""create_app(settings): the FastAPI application, its lifespan resources, routers and error handlers."""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm import __version__, metrics
from memvm.accounts.exposure import ExposureRefused, check_exposure
from memvm.accounts.key_cache import KeyCache
from memvm.api import (
    admin,
    agent_files,
    agents,
    archival,
    auth,
    blocks,
    console,
    core_memory,
    errors,
    health,
    messages,
    models,
    openapi,
    runs,
    search,
    storable,
    tools,
)
from memvm.api import metrics as api_metrics
from memvm.api.limits import BodySizeLimit
from memvm.api.metrics import HttpMetrics
from memvm.config import Settings
from memvm.db.database import DatabaseTarget, resolve_database
from memvm.db.engine import build_engine, build_lock_engine, build_sessionmaker, build_turn_lock_engine
from memvm.db.migrate import upgrade_to_head
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.llm.openai_chat import ChatModelFactory
from memvm.processes import import_deferred_in_background
from memvm.provider import RetryPolicy
from memvm.runtime.background import fail_orphaned_runs
from memvm.runtime.cancel import CancelSignals
from memvm.runtime.deps import RuntimeDeps
from memvm.runtime.retention import start_pruning
from memvm.sandbox.runner import Sandbox
from memvm.search.embedding_queue import EmbeddingWorker
from memvm.tools.service import sync_builtin_tools

log = logging.getLogger("memvm")


def create_app(settings: Settings, *, database: DatabaseTarget | None = None) -> FastAPI:
    """`database` is the already resolved server (the CLI resolves it first so it can log it);
    without it the lifespan resolves one from settings."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        target = database or resolve_database(settings)
        engine, lock_engine = build_engine(target.url, settings), build_lock_engine(target.url)
        turn_lock_engine = build_turn_lock_engine(target.url, settings)
        models, embedders = _model_factory(settings), EmbedderRegistry.from_settings(settings)
        worker, keys, sandbox, cancels, runtime, pruning = None, None, None, None, None, None
        try:
            if settings.migrate_on_start:
                await upgrade_to_head(engine)
            sessionmaker = build_sessionmaker(engine)
            metrics.watch_pool(engine.sync_engine.pool.checkedout, engine.sync_engine.pool.checkedin)  # type: ignore[attr-defined]
            async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
                await sync_builtin_tools(session)
            keys = KeyCache(sessionmaker, lock_engine)
            keys.start()
            await _open_gate(app, settings, sessionmaker, keys)
            app.state.sessionmaker = sessionmaker
            sandbox = Sandbox(settings)
            await sandbox.probe()
            log.log(*sandbox.describe())
            cancels = CancelSignals(lock_engine)
            cancels.start()
            runtime = RuntimeDeps(
                sessionmaker=sessionmaker,
                lock_engine=lock_engine,
                turn_lock_engine=turn_lock_engine,
                models=models,
                embedders=embedders,
                settings=settings,
                sandbox=sandbox,
                cancels=cancels,
            )
            app.state.runtime = runtime
            if orphaned := await fail_orphaned_runs(runtime):
                log.warning("%d run(s) left running by a stopped process were marked failed", orphaned)
            if settings.embedding_worker:
                worker = EmbeddingWorker(
                    sessionmaker, embedders, runtime.embedding_wakeup, poll_seconds=settings.embedding_poll_seconds
                )
                worker.start()
            pruning = start_pruning(sessionmaker, settings)
            import_deferred_in_background()
            yield
        finally:
            if runtime is not None:  # background turns end as cancelled, their steps kept
                for task in list(runtime.background):
                    task.cancel()
                await asyncio.gather(*runtime.background, return_exceptions=True)
            if worker is not None:
                await worker.stop()
            if pruning is not None:
                pruning.cancel()
                await asyncio.gather(pruning, return_exceptions=True)
            if keys is not None:
                await keys.stop()
            if sandbox is not None:
                await sandbox.close()
            if cancels is not None:
                await cancels.stop()
            await embedders.aclose()
            await models.aclose()
            await lock_engine.dispose()
            await turn_lock_engine.dispose()
            await engine.dispose()
            metrics.forget_this_process()

    app = FastAPI(
        title="memvm",
        version=__version__,
        description="Stateful LLM agents with self-editing memory, over the Letta v1 REST API.",
        lifespan=lifespan,
    )
    errors.install(app)
    openapi.declare_security(app)
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.max_request_bytes, exceptions={"/v1/agents/import": settings.max_agent_file_bytes}
    )
    app.add_middleware(HttpMetrics)
    app.include_router(health.router)
    app.include_router(api_metrics.router, responses=errors.RESPONSES)
    for module in (agent_files, agents, core_memory, blocks, messages, runs, models, tools, archival, search, admin):
        guards = [Depends(auth.authenticate), Depends(storable.storable_input)]
        app.include_router(module.router, dependencies=guards, responses=errors.RESPONSES)
    if settings.ui:
        console.install(app)
    return app


async def _open_gate(app: FastAPI, settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], keys: KeyCache) -> None:
    """Access control for the routes (api/auth.py); refuses to serve an unauthenticated server beyond
    loopback, and logs which mode is on."""
    admin_key = settings.admin_api_key.get_secret_value() if settings.admin_api_key else None
    app.state.gate = gate = auth.Gate(sessionmaker, keys, admin_key)
    try:
        level, mode = check_exposure(settings, await gate.keys_required())
    except ExposureRefused as refused:
        log.error("%s", refused)
        raise
    log.log(level, "%s", mode)


def _model_factory(settings: Settings) -> ChatModelFactory:
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    retry = RetryPolicy(attempts=settings.llm_attempts, timeout=settings.llm_timeout_seconds)
    return ChatModelFactory(default_base_url=settings.openai_base_url, default_api_key=key, retry=retry)
