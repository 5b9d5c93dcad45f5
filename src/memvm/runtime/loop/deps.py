"""What the runtime needs from the application, built once in the lifespan."""

import asyncio
from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memvm.config import Settings
from memvm.embeddings.query_cache import QueryVectors
from memvm.embeddings.registry import EmbedderRegistry
from memvm.mcpclient.connections import Connections
from memvm.runtime.loop.cancel import CancelSignals
from memvm.runtime.loop.kept_windows import KeptWindows
from memvm.runtime.loop.models import ModelSource, ProviderModels
from memvm.runtime.loop.run_claims import RunClaims
from memvm.runtime.loop.turn_lock import turn_lock
from memvm.runtime.tools.web import WebTools
from memvm.sandbox.runner import Sandbox


@dataclass(frozen=True)
class RuntimeDeps:
    sessionmaker: async_sessionmaker[AsyncSession]
    lock_engine: AsyncEngine  # unpooled: LISTEN and asking whether a run is claimed (cancel.py, run_claims.py)
    turn_lock_engine: AsyncEngine  # pooled: the agents' turn locks
    models: ModelSource
    embedders: EmbedderRegistry
    settings: Settings
    sandbox: Sandbox  # runs custom tools
    mcp: Connections  # this process's sessions to MCP servers
    cancels: CancelSignals  # cancel requests of the runs this process runs
    run_claims: RunClaims  # this process's background runs, claimed on one connection
    windows: KeptWindows  # the context windows this process's turns read, kept for their next turns
    # Set after a step stores messages, so the embedding worker picks them up at once.
    embedding_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # Set after a file is uploaded, so the file worker parses it at once.
    file_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    query_vectors: QueryVectors = field(default_factory=QueryVectors)
    provider_models: ProviderModels = field(default_factory=ProviderModels)  # GET /v1/models/ cache
    background: set["asyncio.Task[None]"] = field(default_factory=set)  # see in_background

    def turn_lock(
        self, organization_id: str, key: str, *, timeout_seconds: float | None = None
    ) -> AbstractAsyncContextManager[asyncio.Event]:
        """A conversation's turn lock (turn_lock.py; `key`: ThreadRef.lock_key, the agent's id for
        its default conversation), waiting as long as the settings allow unless told otherwise; the
        event is set if the lock is lost."""
        wait = self.settings.turn_lock_timeout_seconds if timeout_seconds is None else timeout_seconds
        return turn_lock(self.turn_lock_engine, organization_id, key, timeout_seconds=wait)

    @property
    def web_tools(self) -> WebTools:
        """The web built-ins (fetch_webpage, web_search) under this process's settings."""
        return WebTools.of(self.settings)

    def in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task of this process, kept until it ends; the lifespan cancels what is left
        when the process stops (background turns end as cancelled)."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
