"""GET /v1/tags/: the tags of the caller's organization's agents and blocks, as letta-client's `tags.list` pages them."""

from typing import Annotated, Literal

from fastapi import Depends, Query

from memvm.agents import tags
from memvm.api.deps import TransactionDep
from memvm.api.routers import api_router
from memvm.db.pagination import NamePage

router = api_router(tags=["tags"])


async def _tag_page(
    after: str | None = Query(None, description="Tags that come after this tag in the listing order."),
    before: str | None = Query(None, description="Tags that come before this tag in the listing order."),
    limit: int = Query(50, ge=1, le=1000, description="Maximum number of tags to return."),
    order: Literal["asc", "desc"] = Query("asc", description="asc: alphabetical; desc: reverse alphabetical."),
    order_by: Literal["name"] = Query("name", description="Tags sort by name only."),
    name: str | None = Query(None, description="Only tags that contain this text (any case)."),
    query_text: str | None = Query(None, deprecated=True, description="Deprecated: use `name`."),
) -> NamePage:
    return NamePage(limit=limit, order=order, after=after, before=before, contains=name or query_text)


@router.get("/v1/tags/", response_model=list[str])
async def list_tags(tx: TransactionDep, page: Annotated[NamePage, Depends(_tag_page)]) -> list[str]:
    """Every tag of your organization's agents and blocks, once each, alphabetically by default."""
    async with tx() as session:
        return await tags.list_tags(session, page)
