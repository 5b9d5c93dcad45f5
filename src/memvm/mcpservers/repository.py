"""All MCP server SQL (their tools' rows are the tools package's)."""

from collections.abc import Collection
from datetime import UTC, datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.dml import rows_affected
from memvm.orm import McpServer


async def get(session: AsyncSession, server_id: str, *, lock: bool = False) -> McpServer | None:
    query = select(McpServer).where(McpServer.id == server_id).execution_options(populate_existing=True)
    return await session.scalar(query.with_for_update() if lock else query)


async def list_all(session: AsyncSession) -> list[McpServer]:
    return list(await session.scalars(select(McpServer).order_by(McpServer.created_at, McpServer.id)))


async def by_ids(session: AsyncSession, server_ids: Collection[str]) -> list[McpServer]:
    return list(await session.scalars(select(McpServer).where(McpServer.id.in_(list(server_ids)))))


async def remove(session: AsyncSession, server_id: str) -> int:
    """Delete the row; the database deletes its tools and their attachments (ON DELETE CASCADE)."""
    return await rows_affected(session, delete(McpServer).where(McpServer.id == server_id))


async def set_status(session: AsyncSession, server_id: str, error: str | None) -> None:
    """Set what the last connect, list or call came to; a server deleted meanwhile is left alone."""
    await session.execute(
        update(McpServer)
        .where(McpServer.id == server_id)
        .values(status="error" if error else "connected", last_error=error, checked_at=datetime.now(UTC))
        .execution_options(synchronize_session=False)
    )
