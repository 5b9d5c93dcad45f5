"""create_app(settings): the FastAPI application, its lifespan resources, routers and error handlers."""

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memvm import __version__, metrics
from memvm.accounts.exposure import ExposureRefused, check_exposure
from memvm.accounts.key_cache import KeyCache
from memvm.api import (
    admin,
    agent_files,
    agentfiles,
    agents,
    archival,
    auth,
    blocks,
    cloud_only,
    console,
    conversations,
    core_memory,
    embeddings,
    errors,
    folders,
    git,
    health,
    identities,
    mcp_servers,
    messages,
    models,
    openapi,
    runs,
    search,
    tags,
    tools,
)
from memvm.api import metrics as api_metrics
from memvm.api.idle_memory import ReturnMemoryWhenIdle
from memvm.api.limits import MULTIPART_ENVELOPE_BYTES, BodyCap, BodySizeLimit
from memvm.api.metrics import HttpMetrics
from memvm.api.routers import add_routes
from memvm.blocks.retention import start_pruning
from memvm.config import Settings
from memvm.db.database import DatabaseTarget, resolve_database
from memvm.db.engine import build_engine, build_lock_engine, build_sessionmaker, build_turn_lock_engine
from memvm.db.migrate import upgrade_to_head
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.files.processing import FileWorker
from memvm.llm.openai_chat import ChatModelFactory
from memvm.mcpclient.connections import Connections
from memvm.processes import import_deferred_in_background
from memvm.provider import RetryPolicy
from memvm.runtime.loop.background import fail_orphaned_runs
from memvm.runtime.loop.cancel import CancelSignals
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.kept_windows import KeptWindows
from memvm.runtime.loop.run_claims import RunClaims
from memvm.sandbox.runner import Sandbox
from memvm.search.embedding_queue import EmbeddingWorker
from memvm.tools.service import sync_builtin_tools

log = logging.getLogger("memvm")


def create_app(settings: Settings, *, database: DatabaseTarget | None = None, tools_synced: bool = False) -> FastAPI:
    """`database` is the already resolved server (the CLI resolves it first so it can log it);
    without it the lifespan resolves one from settings. `tools_synced`: the built-in tools were
    stored before this app's processes started (`memvm serve`'s preflight), so they skip it."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await _start(app, stack, settings, database or resolve_database(settings), sync_tools=not tools_synced)
            import_deferred_in_background()
            yield

    app = FastAPI(
        title="memvm",
        version=__version__,
        description="Stateful LLM agents with self-editing memory, over the Letta v1 REST API.",
        lifespan=lifespan,
    )
    errors.install(app)
    openapi.declare_security(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes, exceptions=_upload_caps(settings))
    app.add_middleware(HttpMetrics)
    app.add_middleware(ReturnMemoryWhenIdle)  # outermost: a request is in flight until its last byte
    _add_routes(app, settings)
    return app


def _upload_caps(settings: Settings) -> list[BodyCap]:
    """The routes that take files get caps of their own. A folder file's cap leaves room for the
    multipart envelope around it; the route checks the file itself against the setting."""
    return [
        BodyCap(re.compile("/v1/agents/import"), settings.max_agent_file_bytes, "MEMVM_MAX_AGENT_FILE_BYTES"),
        BodyCap(
            re.compile("/v1/folders/[^/]+/upload"),
            settings.max_file_upload_bytes + MULTIPART_ENVELOPE_BYTES,
            "MEMVM_MAX_FILE_UPLOAD_BYTES",
            "upload a smaller file, or split it",
        ),
    ]


def _add_routes(app: FastAPI, settings: Settings) -> None:
    """The routes each module built at import, served in this order (api/routers.py says why they
    are not included)."""
    add_routes(app, health.router)
    add_routes(app, api_metrics.router)
    for module in (
        agentfiles,
        agents,
        agent_files,
        core_memory,
        blocks,
        messages,
        conversations,
        runs,
        models,
        tools,
        embeddings,
        archival,
        folders,
        identities,
        mcp_servers,
        search,
        tags,
        admin,
        git,
        cloud_only,
    ):
        add_routes(app, module.router)  # guarded: each module's router is an api_router
    if settings.ui:
        console.install(app)


async def _start(app: FastAPI, stack: AsyncExitStack, settings: Settings, target: DatabaseTarget, *, sync_tools: bool) -> None:
    """Start what the app serves with, in order. Each stop is pushed on `stack` right after its start,
    so the stack stops them in reverse: nothing stops while something started after it still runs,
    and a start that fails stops what had started before it."""
    stack.callback(metrics.forget_this_process)
    database = await _open_database(stack, settings, target, sync_tools=sync_tools)
    keys = _started(stack, KeyCache(database.sessionmaker, database.lock_engine))
    app.state.gate = await _open_gate(settings, database.sessionmaker, keys)
    app.state.sessionmaker = database.sessionmaker
    app.state.runtime = runtime = await _open_runtime(stack, settings, database)
    if settings.embedding_worker:
        wakeup, poll_seconds = runtime.embedding_wakeup, settings.embedding_poll_seconds
        _started(stack, EmbeddingWorker(database.sessionmaker, runtime.embedders, wakeup, poll_seconds=poll_seconds))
        files = FileWorker(database.sessionmaker, runtime.file_wakeup, embedding_wakeup=wakeup, poll_seconds=poll_seconds)
        _started(stack, files)
    if (pruning := start_pruning(database.sessionmaker, settings)) is not None:
        stack.push_async_callback(_cancel, [pruning])


@dataclass(frozen=True)
class _Database:
    sessionmaker: async_sessionmaker[AsyncSession]
    lock_engine: AsyncEngine  # unpooled: LISTEN and run claims (one connection holds all of a process's)
    turn_lock_engine: AsyncEngine  # pooled: the agents' turn locks


async def _open_database(stack: AsyncExitStack, settings: Settings, target: DatabaseTarget, *, sync_tools: bool) -> _Database:
    """The engines, the schema migrated (MEMVM_MIGRATE_ON_START) and the built-in tools stored."""
    engine = build_engine(target.url, settings)
    stack.push_async_callback(engine.dispose)
    lock_engine = build_lock_engine(target.url)
    stack.push_async_callback(lock_engine.dispose)
    turn_lock_engine = build_turn_lock_engine(target.url, settings)
    stack.push_async_callback(turn_lock_engine.dispose)
    if settings.migrate_on_start:
        await upgrade_to_head(engine)
    sessionmaker = build_sessionmaker(engine)
    metrics.watch_pool(engine.sync_engine.pool.checkedout, engine.sync_engine.pool.checkedin)  # type: ignore[attr-defined]
    if sync_tools:
        async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
            await sync_builtin_tools(session)
    return _Database(sessionmaker, lock_engine, turn_lock_engine)


async def _open_gate(settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], keys: KeyCache) -> auth.Gate:
    """Access control for the routes (api/auth.py); refuses to serve an unauthenticated server beyond
    loopback, and logs which mode is on."""
    admin_key = settings.admin_api_key.get_secret_value() if settings.admin_api_key else None
    gate = auth.Gate(sessionmaker, keys, admin_key)
    try:
        level, mode = check_exposure(settings, await gate.keys_required())
    except ExposureRefused as refused:
        log.error("%s", refused)
        raise
    log.log(level, "%s", mode)
    return gate


async def _open_runtime(stack: AsyncExitStack, settings: Settings, database: _Database) -> RuntimeDeps:
    """What the agent loop runs with. Its background turns are the first of it to stop: they end as
    cancelled, their steps kept. Runs that a stopped process left running are marked failed."""
    models = _model_factory(settings)
    stack.push_async_callback(models.aclose)
    embedders = EmbedderRegistry.from_settings(settings)
    stack.push_async_callback(embedders.aclose)
    sandbox = Sandbox(settings)
    stack.push_async_callback(sandbox.close)
    await sandbox.probe()
    log.log(*sandbox.describe())
    mcp = Connections(settings, sandbox)
    stack.push_async_callback(mcp.close)
    runtime = RuntimeDeps(
        sessionmaker=database.sessionmaker,
        lock_engine=database.lock_engine,
        turn_lock_engine=database.turn_lock_engine,
        models=models,
        embedders=embedders,
        settings=settings,
        sandbox=sandbox,
        mcp=mcp,
        cancels=_started(stack, CancelSignals(database.lock_engine)),
        run_claims=RunClaims(database.lock_engine),
        windows=KeptWindows(settings.window_cache_tokens),
    )
    stack.push_async_callback(runtime.run_claims.close)
    stack.push_async_callback(_end_background_turns, runtime)
    if orphaned := await fail_orphaned_runs(runtime):
        log.warning("%d run(s) left running by a stopped process were marked failed", orphaned)
    return runtime


class _Service(Protocol):
    def start(self) -> None: ...

    async def stop(self) -> None: ...


ServiceT = TypeVar("ServiceT", bound=_Service)


def _started(stack: AsyncExitStack, service: ServiceT) -> ServiceT:
    service.start()
    stack.push_async_callback(service.stop)
    return service


async def _end_background_turns(runtime: RuntimeDeps) -> None:
    await _cancel(list(runtime.background))  # a copy: each task leaves the set as it ends


async def _cancel(tasks: list["asyncio.Task[None]"]) -> None:
    """Cancel the tasks and wait until they have ended."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _model_factory(settings: Settings) -> ChatModelFactory:
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    retry = RetryPolicy(attempts=settings.llm_attempts, timeout=settings.llm_timeout_seconds)
    return ChatModelFactory(default_base_url=settings.openai_base_url, default_api_key=key, retry=retry)
