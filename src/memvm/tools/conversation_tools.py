"""send_message and conversation_search."""

import json

from memvm.messages import search
from memvm.tools.context import ToolContext


async def send_message(ctx: ToolContext, message: str) -> str:
    return "Sent message successfully."


async def conversation_search(
    ctx: ToolContext,
    query: str,
    roles: list[str] | None = None,
    limit: int | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
) -> str:
    hits = await search.search_history(
        ctx.session, ctx.agent_id, query=query, roles=roles, limit=limit or 5, start_date=start_date, end_date=end_date
    )
    if not hits:
        return json.dumps({"message": "No results found.", "results": []})
    results = [{"timestamp": hit.created_at.isoformat(timespec="seconds"), "role": hit.role, "content": hit.content} for hit in hits]
    return json.dumps({"message": f"Showing {len(results)} results:", "results": results}, ensure_ascii=False)
