"""Searching conversation history over the API: embed the query (outside any transaction),
then rank in PostgreSQL."""

from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.conversations import service as conversations
from memvm.conversations.thread import ThreadRef
from memvm.db.uow import transaction
from memvm.orm import Agent
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.search.conversation import MessageHit, QueryVector, SearchMode, search_messages
from memvm.search.dates import parse_bound
from memvm.search.tuning import SearchTuning
from memvm.threads import ANY_CONVERSATION


async def search_history(
    deps: RuntimeDeps,
    caller: Caller,
    *,
    query: str,
    agent_id: str | None,
    conversation_id: str | None,
    mode: SearchMode,
    roles: list[str],
    start_date: str | None,
    end_date: str | None,
    limit: int,
) -> list[MessageHit]:
    """One agent's history, or every agent's when `agent_id` is None (the query is then embedded
    with the server's default model, so agents on other models match by full text only); one
    conversation's (`default`, with `agent_id`, or a conv id) or, without `conversation_id`, all."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        agent, within = await _scope(session, agent_id, conversation_id)
        agent_ids = [agent.id] if agent else await agents.all_agent_ids(session)
    embedder = deps.embedders.for_handle(agent.embedding if agent else None)
    vector = None
    if mode != "fts" and query.strip():
        vector = QueryVector(embedder.model, embedder.dim, await deps.query_vectors.vector(embedder, query))
    timezone = agent.timezone if agent else "UTC"
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        with metrics.timed(metrics.SEARCH_SECONDS, "conversation"):
            return await search_messages(
                session,
                agent_ids=agent_ids,
                conversation_id=within,
                query=query,
                vector=vector,
                mode=mode,
                roles=roles,
                limit=limit,
                start=parse_bound(start_date, "start_date", end=False, timezone=timezone),
                end=parse_bound(end_date, "end_date", end=True, timezone=timezone),
                tuning=SearchTuning.of(deps.settings),
            )


async def _scope(session: AsyncSession, agent_id: str | None, conversation_id: str | None) -> tuple[Agent | None, str | None]:
    """The agent searched (None: every agent) and the conversation filter of search_messages."""
    if conversation_id is None:
        return (await agents.get_agent(session, agent_id) if agent_id else None), ANY_CONVERSATION
    thread = await conversations.open_thread(session, ThreadRef.of(conversation_id, agent_id))
    return thread.agent, thread.conversation_id
