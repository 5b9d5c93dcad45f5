"""Block-history retention: when the operator asks for it (keep the last N versions, or N days),
history is pruned by a background task of each process, never on the write path. Several replicas
pruning at once is harmless: each DELETE removes what is still there."""

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.blocks import history
from memvm.config import Settings
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction

log = logging.getLogger(__name__)


def start_pruning(sessionmaker: async_sessionmaker[AsyncSession], settings: Settings) -> "asyncio.Task[None] | None":
    """The pruning task, or None when history is kept for each block's lifetime (the default)."""
    if settings.block_history_keep_versions is None and settings.block_history_keep_days is None:
        return None
    return asyncio.create_task(_prune_forever(sessionmaker, settings), name="block-history-retention")


async def prune_once(sessionmaker: async_sessionmaker[AsyncSession], settings: Settings) -> int:
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        return await history.prune(
            session, keep_versions=settings.block_history_keep_versions, keep_days=settings.block_history_keep_days
        )


async def _prune_forever(sessionmaker: async_sessionmaker[AsyncSession], settings: Settings) -> None:
    while True:
        try:
            if pruned := await prune_once(sessionmaker, settings):
                log.info("block-history retention pruned %d old version(s)", pruned)
        except Exception:  # a failed round (database restarting) is retried at the next one
            log.exception("block-history retention failed; retrying in %.0f s", settings.block_history_prune_seconds)
        await asyncio.sleep(settings.block_history_prune_seconds)
