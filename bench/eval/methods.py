"""The retrieval methods compared, each asked one question at one k: the server's tools (the code path
the agent's tools run), memvm's search routes in one mode, and the harness's own BM25. The tools are
asked through the same route on memvm and Letta 0.16.8 (`POST /v1/agents/{id}/tools/{name}/run`)."""

from __future__ import annotations

import ast
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
    """Where a conversation lives in a server, and how to name its turns from what searches return."""

    conversation: Conversation
    agent_id: str
    session_agent_id: str
    window_agent_id: str
    bm25: BM25
    turn_at: dict[tuple[int, str], str]  # (epoch second, content) -> dia_id

    @classmethod
    def of(cls, conversation: Conversation, agent_id: str, session_agent_id: str, window_agent_id: str) -> Target:
        turns = conversation.turns
        turn_at = {(int(t.at.timestamp()), t.content): t.dia_id for t in turns}
        return cls(conversation, agent_id, session_agent_id, window_agent_id, BM25([t.content for t in turns]), turn_at)

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


async def _run_tool(client: httpx.AsyncClient, agent_id: str, tool: str, args: dict[str, Any]) -> tuple[Any, int, float]:
    """The tool's return (as the route gives it), its length in characters, and the call's latency."""
    response, elapsed = await _timed(client, "POST", f"/v1/agents/{agent_id}/tools/{tool}/run", json={"args": args})
    result = response.json()
    if result["status"] != "success":
        raise RuntimeError(f"{tool} failed: {str(result.get('func_return') or result.get('stderr'))[:500]}")
    returned = result["func_return"]
    text = returned if isinstance(returned, str) else json.dumps(returned, ensure_ascii=False)
    return returned, len(text), elapsed


_CLIP_MARK = "\n… [truncated: the result exceeded"  # what memvm appends to a return cut at its limit
# What Letta appends to a return over the tool's limit; it cuts nothing, and the text before it is the
# return's Python repr (its tool executor calls str() on the list).
_LETTA_OVER_LIMIT = "... [NOTE: function output was truncated"


def _results(returned: Any) -> list[dict[str, Any]]:
    """A search tool's results: memvm returns JSON text holding {"results": [...]}; Letta returns the
    data itself ({"results": [...]} for messages, the bare list for passages), or its repr plus a note
    when it is over the tool's character limit."""
    if isinstance(returned, str):
        note = returned.rfind(_LETTA_OVER_LIMIT)
        text = returned[:note] if note >= 0 else returned
        try:
            returned = json.loads(text)
        except json.JSONDecodeError:  # Letta's repr of a list of dicts (quotes, None) is no JSON
            returned = ast.literal_eval(text)
    return list(returned["results"] if isinstance(returned, dict) else returned)


async def conversation_search(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    returned, chars, elapsed = await _run_tool(client, target.agent_id, "conversation_search", {"query": query, "limit": k})
    ranking = [target.dia_id_of_message(r["timestamp"], r["content"]) for r in _results(returned)]
    return Answer(ranking, elapsed, chars)


def _passage_tags(returned: Any) -> tuple[list[frozenset[str]], bool]:
    """The tags of each passage in a tool's return, in order; a return memvm cut at the tool's
    character limit keeps the passages whose tags made it (the model would not see the others' either)."""
    cut = returned.rfind(_CLIP_MARK) if isinstance(returned, str) else -1
    if cut >= 0:  # a passage whose tags were cut off has no closing bracket, so it is not matched
        return [frozenset(json.loads(tags)) for tags in _TAGS.findall(returned[:cut])], True
    return [frozenset(r["tags"]) for r in _results(returned)], False


async def _archival_tool(client: httpx.AsyncClient, agent_id: str, query: str, k: int) -> Answer:
    returned, chars, elapsed = await _run_tool(client, agent_id, "archival_memory_search", {"query": query, "top_k": k})
    ranking, clipped = _passage_tags(returned)
    return Answer(ranking, elapsed, chars, clipped)


async def archival_turns(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    return await _archival_tool(client, target.agent_id, query, k)


async def archival_sessions(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    return await _archival_tool(client, target.session_agent_id, query, k)


async def archival_windows(client: httpx.AsyncClient, target: Target, query: str, k: int) -> Answer:
    return await _archival_tool(client, target.window_agent_id, query, k)


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
    "archival_windows": ("archival_memory_search tool, one passage per 3 turns of a session (1 shared)", archival_windows),
}
