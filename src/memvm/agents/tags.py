"""The organization's tags (Letta's GET /v1/tags/): every tag of its agents and of its blocks,
once each, in code-point order, one page at a time."""

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents import repository
from memvm.blocks import service as blocks
from memvm.db.pagination import NamePage


async def list_tags(session: AsyncSession, page: NamePage) -> list[str]:
    # The page of the union is within the union of each side's page: merge those, then cut.
    merged = set(await repository.tags(session, page)) | set(await blocks.block_tags(session, page))
    return sorted(merged, reverse=page.order == "desc")[: page.limit]
