"""The retrieval methods compared, each asked one question at one k: memvm's tools (the code path
the agent's tools run), memvm's search routes in one mode, and the harness's own BM25."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from .bm25 import BM25
from .data import Conversation, Turn, epoch_of
from .scoring import Ranking

_TAGS = re.compile(r'"tags":\s*(\[[^\]]*\])')


@dataclass(frozen=True)
class Answer:
    ranking: Ranking
    latency_ms: float
    text_chars: int  # of the context the method returns (the whole tool return for tools)
    clipped: bool = False  # the tool's return was cut at its character limit


@dataclass(frozen=True)
class Target:
    """Where a conversation lives in memvm, and how to name its turns from what searches return."""

    conversation: Conversation
    agent_id: str
    session_agent_id: str
    bm25: BM25
    turn_at: dict[tuple[int, str], str]  # (epoch second, content) -> dia_id

    @classmethod
    def of(cls, conversation: Conversation, agent_id: str, session_agent_id: str) -> Target:
        turns = conversation.turns
        turn_at = {(int(t.at.timestamp()), t.content): t.dia_id for t in turns}
        return cls(conversation, agent_id, session_agent_id, BM25([t.content for t in turns]), turn_at)

    def dia_id_of_message(self, timestamp: str, content: str | None) -> frozenset[str]:
        """A message's turn, by its time (to the second) and text; nothing for a message of no turn."""
        dia_id = self.turn_at.get((epoch_of(timestamp), content or ""))
        return frozenset([dia_id]) if dia_id else frozenset()


Ask = Callable[[httpx.AsyncClient, Target, str, int], Awaitable[Answer]]


async def _timed(client: httpx.AsyncClient, method: str, path: str, **kw: Any) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    response = await client.request(method, path, **kw)
    elapsed = (time.perf_counter() - start) * 1000
    if response.status_code >= 400:
        raise RuntimeError(f"{method} {path} -> {response.status_code}: {response.text[:500]}")
    return response, elapsed


async def _run_tool(client: httpx.AsyncClient, agent_id: str, tool: str, args: dict[str, Any]) -> tuple[str, float]:
    response, elapsed = await _timed(client, "POST", f"/v1/agents/{agent_id}/tools/{tool}/run", json={"args": args})
    result = response.json()
    if result["status"] != "success":
        raise RuntimeError(f"{tool} failed: {result['func_return'][:500]}")
    return str(result["func_return"]), elapsed


_CLIP_MARK = "\n… [truncated: the result exceeded"  # what memvm appends to a return cut at its limit


async def conversation_search(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    text, elapsed = await _run_tool(client, target.agent_id, "conversation_search", {"query": query, "limit": k})
    results = json.loads(text)["results"]
    ranking = [target.dia_id_of_message(r["timestamp"], r["content"]) for r in results]
    return Answer(ranking, elapsed, len(text))


def _passage_tags(text: str) -> tuple[list[frozenset[str]], bool]:
    """The tags of each passage in a tool's return, in order; a return cut at the tool's character
    limit keeps the passages whose tags made it (the model would not see the others' either)."""
    cut = text.rfind(_CLIP_MARK)
    if cut >= 0:  # a passage whose tags were cut off has no closing bracket, so it is not matched
        return [frozenset(json.loads(tags)) for tags in _TAGS.findall(text[:cut])], True
    return [frozenset(r["tags"]) for r in json.loads(text)["results"]], False


async def _archival_tool(client: httpx.AsyncClient, agent_id: str, query: str, k: int) -> Answer:
    text, elapsed = await _run_tool(client, agent_id, "archival_memory_search", {"query": query, "top_k": k})
    ranking, clipped = _passage_tags(text)
    return Answer(ranking, elapsed, len(text), clipped)


async def archival_turns(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    return await _archival_tool(client, target.agent_id, query, k)


async def archival_sessions(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    return await _archival_tool(client, target.session_agent_id, query, k)


async def _message_route(client: httpx.AsyncClient, target: Target, query: str, k: int, mode: str) -> Answer:
    body = {"query": query, "agent_id": target.agent_id, "search_mode": mode, "limit": k}
    response, elapsed = await _timed(client, "POST", "/v1/agents/messages/search", json=body)
    hits = response.json()
    ranking = [target.dia_id_of_message(h["message"]["created_at"], h["message"]["content"]) for h in hits]
    return Answer(ranking, elapsed, sum(len(h["message"]["content"] or "") for h in hits))


async def messages_fts(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    return await _message_route(client, target, query, k, "fts")


async def messages_vector(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    return await _message_route(client, target, query, k, "vector")


async def bm25(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    start = time.perf_counter()
    top: list[Turn] = [target.conversation.turns[i] for i in target.bm25.top(query, k)]
    elapsed = (time.perf_counter() - start) * 1000
    return Answer([frozenset([t.dia_id]) for t in top], elapsed, sum(len(t.content) for t in top))


# name -> (what it is, how to ask it); the first is memvm's default (the agent's own recall tool)
METHODS: dict[str, tuple[str, Ask]] = {
    "conversation_search": ("memvm default: conversation_search tool (hybrid), recall memory", conversation_search),
    "messages_fts": ("full text alone: POST /v1/agents/messages/search fts", messages_fts),
    "messages_vector": ("dense alone: POST /v1/agents/messages/search vector", messages_vector),
    "bm25": ("BM25 alone (harness, k1=1.2 b=0.75) over the turns", bm25),
    "archival_turns": ("archival_memory_search tool, one passage per turn", archival_turns),
    "archival_sessions": ("archival_memory_search tool, one passage per session", archival_sessions),
}
