"""send_message and conversation_search."""

import json

from memvm import metrics
from memvm.errors import InvalidInput
from memvm.runtime.tools.context import ToolContext
from memvm.search.conversation import QueryVector, search_messages
from memvm.search.dates import parse_bound
from memvm.threads import ANY_CONVERSATION

SEARCHABLE_ROLES = ("user", "assistant", "tool")


async def send_message(ctx: ToolContext, message: str) -> str:
    return "Sent message successfully."


async def conversation_search(
    ctx: ToolContext,
    query: str,
    roles: list[str] | None = None,
    limit: int | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    all_conversations: bool = False,
) -> str:
    """Hybrid (full text + meaning) over this conversation's history before this turn (every
    conversation of the agent with `all_conversations`); full text alone if no vector is at hand."""
    unknown = sorted(set(roles or ()) - set(SEARCHABLE_ROLES))
    if unknown:
        raise InvalidInput(f"Unknown role(s) {', '.join(unknown)}; use {', '.join(SEARCHABLE_ROLES)}.")
    values = ctx.vector_for(query)
    vector = QueryVector(ctx.embedding.model, ctx.embedding.dim, values) if values is not None and ctx.embedding else None
    with metrics.timed(metrics.SEARCH_SECONDS, "conversation"):
        hits = await search_messages(
            ctx.session,
            agent_ids=[ctx.agent_id],
            conversation_id=ANY_CONVERSATION if all_conversations else ctx.conversation_id,
            query=query,
            vector=vector,
            roles=roles or (),
            limit=limit or 5,
            exclude_run_id=ctx.run_id,
            tuning=ctx.search,
            start=parse_bound(start_date, "start_date", end=False, timezone=ctx.timezone),
            end=parse_bound(end_date, "end_date", end=True, timezone=ctx.timezone),
        )
    if not hits:
        return json.dumps({"message": "No results found.", "results": []})
    results = [
        {
            "timestamp": h.message.created_at.isoformat(timespec="seconds"),
            "role": h.message.role,
            "content": h.message.content,
            "relevance": round(h.score.rrf_score, 5),
        }
        for h in hits
    ]
    return json.dumps({"message": f"Showing {len(results)} results:", "results": results}, ensure_ascii=False)
