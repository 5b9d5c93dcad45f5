"""archival_memory_insert and archival_memory_search."""

import json
from collections.abc import Sequence

from memvm.archives import service as archives
from memvm.archives.schemas import MAX_PASSAGE_CHARS, PassageCreate
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import InvalidInput, MemoryEditError
from memvm.runtime.tools.context import ToolContext
from memvm.search.dates import parse_bound
from memvm.search.passages import PassageSearch, search_passages

_NO_RESULTS = json.dumps({"message": "No results found.", "results": []})


async def archival_memory_insert(ctx: ToolContext, content: str, tags: list[str] | None = None) -> str:
    if not content.strip():
        raise MemoryEditError("content is empty; pass the text to store.")
    if len(content) > MAX_PASSAGE_CHARS:
        raise MemoryEditError(
            f"content is {len(content)} characters; the limit is {MAX_PASSAGE_CHARS}. Split it into several inserts."
        )
    vector, model = _embedded(ctx, content)
    archive = await archives.write_archive(ctx.session, ctx.agent_id, model)
    [passage] = await archives.insert_passages(
        ctx.session,
        archive,
        [(PassageCreate(text=content, tags=tags or []), list(vector))],
        model=model,
        writer=ctx.actor,
        source_message_id=ctx.message_id,
    )
    return f"Stored in archival memory as {passage.id}" + (f" with tags {', '.join(passage.tags)}." if passage.tags else ".")


async def archival_memory_search(
    ctx: ToolContext,
    query: str,
    tags: list[str] | None = None,
    tag_match_mode: str = "any",
    top_k: int | None = None,
    start_datetime: str | None = None,
    end_datetime: str | None = None,
) -> str:
    if tag_match_mode not in ("any", "all"):
        raise InvalidInput(f"tag_match_mode must be 'any' or 'all' (got {tag_match_mode!r}).")
    start = parse_bound(start_datetime, "start_datetime", end=False, timezone=ctx.timezone)
    end = parse_bound(end_datetime, "end_datetime", end=True, timezone=ctx.timezone)
    archive_ids = [a.id for a in await archives.archives_of(ctx.session, ctx.agent_id)]
    if not archive_ids:
        return _NO_RESULTS
    vector, model = _embedded(ctx, query)
    search = PassageSearch(
        archive_ids=archive_ids,
        model=model.model,
        dim=model.dim,
        query_vector=vector,
        top_k=top_k or 5,
        tags=tags or (),
        match_all_tags=tag_match_mode == "all",
        start=start,
        end=end,
        query=query,
    )
    hits = await search_passages(ctx.session, search, ctx.search)
    if not hits:
        return _NO_RESULTS
    results = [
        {
            "id": h.passage.id,
            "timestamp": h.passage.created_at.isoformat(timespec="seconds"),
            "content": h.passage.text,
            "tags": h.passage.tags,
            "relevance": round(h.relevance, 4),
        }
        for h in hits
    ]
    return json.dumps({"message": f"Showing {len(results)} results:", "results": results}, ensure_ascii=False)


def _embedded(ctx: ToolContext, text: str) -> tuple[Sequence[float], EmbeddingModel]:
    """The text's vector (computed before the step's transaction) and the model it came from."""
    vector = ctx.vector_for(text)
    if vector is None or ctx.embedding is None:
        raise MemoryEditError("The embedding model is unavailable right now, so archival memory cannot be used; try again later.")
    return vector, ctx.embedding
