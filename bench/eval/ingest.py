"""Putting a conversation into a server through its public API only: the history as an imported agent
file (memvm has no route that adds history without running the agent; Letta 0.16.8's one, the unlisted
POST /v1/agents/{id}/messages/capture, dates every message now), one archival passage per turn on that
agent, and a second agent with one passage per session. The same routes serve memvm and Letta 0.16.8;
only the agents' settings differ (`AgentSettings`)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from .data import Conversation, Turn, epoch_of

PendingCount = Callable[[], Awaitable[int]]
Analyze = Callable[[], Awaitable[None]]
AgentSettings = dict[str, Any]  # merged into every agent the harness makes (file and create body)
# never called: retrieval does not use the chat model
UNUSED_LLM = {
    "model": "unused",
    "model_endpoint_type": "openai",
    "model_endpoint": "http://127.0.0.1:9/v1",
    "context_window": 32000,
}
SEARCH_TOOLS = ("conversation_search", "archival_memory_search")
INSERTS_AT_ONCE = 4
# A session passage longer than this is cut into several (memvm's passage limit is 10,000 characters).
SESSION_CHUNK_CHARS = 9_000
# A window passage: this many turns of a session, one starting every WINDOW_STRIDE turns (so
# consecutive windows share a turn): issue 29's few-turn chunks. In a mirror of memvm's archival
# ranking, 2-5 turn windows found no more than passages of one turn given the same tokens to return.
WINDOW_TURNS = 3
WINDOW_STRIDE = 2
# What the embedding worker still has to embed in `message` (its queue predicate, memvm/orm/message.py).
PENDING_MESSAGES_SQL = (
    "SELECT count(*) FROM message WHERE embedding IS NULL AND kind = 'message'"
    " AND coalesce(content, '') <> '' AND embed_attempts < 5"
)


@dataclass
class Ingested:
    """The agents one conversation became, and how long each part took."""

    agent_id: str  # history + one passage per turn
    session_agent_id: str  # one passage per session
    window_agent_id: str  # one passage per few turns (window_chunks)
    seconds: dict[str, float]
    lost_turns: list[str]  # dia_ids of turns the history listed back does not hold


async def no_pending() -> int:
    """For a server that embeds on insert and not in a background worker (Letta's passages)."""
    return 0


async def no_analyze() -> None:
    """For a server whose database the harness does not read (Letta's)."""


def _file_message(index: int, role: str, text: str, at: datetime) -> dict[str, object]:
    return {
        "type": "message",
        "id": f"message-{index}",
        "role": role,
        "content": [{"type": "text", "text": text}],
        "created_at": at.isoformat(),
        "tool_calls": None,
        "tool_call_id": None,
        "tool_returns": [],
    }


def agent_file(conversation: Conversation, settings: AgentSettings | None = None) -> dict[str, object]:
    """A memvm/Letta multi-entity agent file whose history is every turn: the first speaker's turns
    as `user`, the second's as `assistant`; only the system message in the context window."""
    first = conversation.speakers[0]
    messages = [_file_message(0, "system", "LoCoMo evaluation agent.", conversation.turns[0].at - timedelta(seconds=1))]
    for turn in conversation.turns:
        role = "user" if turn.speaker == first else "assistant"
        messages.append(_file_message(len(messages), role, turn.content, turn.at))
    tools = [{"id": f"tool-{i}", "tool_type": "letta_core", "name": name} for i, name in enumerate(SEARCH_TOOLS)]
    agent = {
        "id": "agent-0",
        "name": f"locomo-{conversation.name}",
        "agent_type": "letta_v1_agent",
        "system": "LoCoMo evaluation agent.",
        "llm_config": UNUSED_LLM,
        "tool_ids": [str(t["id"]) for t in tools],
        "in_context_message_ids": ["message-0"],
        "messages": messages,
        **(settings or {}),
    }
    # the file carries the tools its agent names (settings may name none: Letta gives its own)
    tools = [t for t in tools if t["id"] in agent["tool_ids"]]
    entities = {"blocks": [], "tools": tools, "groups": [], "files": [], "sources": [], "mcp_servers": []}
    return {"agents": [agent], **entities, "metadata": {}}  # every list Letta's AgentFileSchema requires


def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path} -> {response.status_code}: {response.text[:500]}"
        )
    return response


async def import_history(client: httpx.AsyncClient, conversation: Conversation, settings: AgentSettings) -> str:
    content = json.dumps(agent_file(conversation, settings)).encode()
    files = {"file": (f"locomo-{conversation.name}.af", content, "application/json")}
    response = _ok(await client.post("/v1/agents/import", files=files))
    [agent_id] = response.json()["agent_ids"]
    return str(agent_id)


async def listed_history(client: httpx.AsyncClient, agent_id: str) -> list[dict[str, object]]:
    """The agent's user and assistant messages, oldest first, page by page."""
    listed: list[dict[str, object]] = []
    after: str | None = None
    while True:
        params: dict[str, str | int] = {"order": "asc", "limit": 500}
        if after:
            params["after"] = after
        page = (_ok(await client.get(f"/v1/agents/{agent_id}/messages", params=params))).json()
        if not page:
            return [m for m in listed if m.get("message_type") in ("user_message", "assistant_message")]
        listed += page
        after = str(page[-1]["id"])


async def lost_turns(client: httpx.AsyncClient, agent_id: str, conversation: Conversation) -> list[str]:
    """The turns the stored history does not give back with their time and text, in conversation
    order; a message's (time, content) names its dia_id, so a lost turn can never be found."""
    listed = await listed_history(client, agent_id)
    stored = {(epoch_of(str(m["date"])), m.get("content")) for m in listed}
    return [t.dia_id for t in conversation.turns if (int(t.at.timestamp()), t.content) not in stored]


async def insert_passage(client: httpx.AsyncClient, agent_id: str, text: str, tags: list[str], at: datetime) -> None:
    body = {"text": text, "tags": tags, "created_at": at.isoformat()}
    _ok(await client.post(f"/v1/agents/{agent_id}/archival-memory", json=body))


async def insert_passages(client: httpx.AsyncClient, agent_id: str, chunks: list[list[Turn]]) -> None:
    """One passage per chunk of turns (their texts joined, tagged with their dia_ids, dated by the
    first), a few at once: how long ingestion takes is not what is measured, and each insert embeds."""
    gate = asyncio.Semaphore(INSERTS_AT_ONCE)

    async def insert(chunk: list[Turn]) -> None:
        async with gate:
            text = "\n".join(t.content for t in chunk)
            await insert_passage(client, agent_id, text, [t.dia_id for t in chunk], chunk[0].at)

    await asyncio.gather(*(insert(chunk) for chunk in chunks))


def session_chunks(turns: list[Turn]) -> list[list[Turn]]:
    """A session's turns in runs that fit one passage (normally the whole session)."""
    chunks: list[list[Turn]] = [[]]
    size = 0
    for turn in turns:
        if chunks[-1] and size + len(turn.content) + 1 > SESSION_CHUNK_CHARS:
            chunks.append([])
            size = 0
        chunks[-1].append(turn)
        size += len(turn.content) + 1
    return chunks


def window_chunks(turns: list[Turn], size: int = WINDOW_TURNS, stride: int = WINDOW_STRIDE) -> list[list[Turn]]:
    """A session's turns in windows of `size`, one starting every `stride` turns, the last one ending
    with the session's last turn (shorter when the session is)."""
    starts = range(0, max(1, len(turns) - size + stride), stride)
    return [turns[start : start + size] for start in starts]


async def create_passage_agent(
    client: httpx.AsyncClient, conversation: Conversation, settings: AgentSettings, kind: str, chunks: list[list[Turn]]
) -> str:
    """A second agent of the conversation (named by `kind`) whose archive holds one passage per chunk."""
    body = {
        "name": f"locomo-{conversation.name}-{kind}",
        "llm_config": UNUSED_LLM,
        "tools": ["archival_memory_search"],
        **settings,
    }
    agent_id = str((_ok(await client.post("/v1/agents/", json=body))).json()["id"])
    await insert_passages(client, agent_id, chunks)
    return agent_id


async def wait_embedded(pending: PendingCount, timeout: float) -> float:
    """Seconds until the embedding worker has embedded every stored message."""
    start = time.perf_counter()
    while (left := await pending()) > 0:
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"{left} messages still without a vector after {timeout:g} s")
        await asyncio.sleep(0.25)
    return time.perf_counter() - start


async def ingest(
    client: httpx.AsyncClient, conversation: Conversation, settings: AgentSettings, pending: PendingCount, timeout: float
) -> Ingested:
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    agent_id = await import_history(client, conversation, settings)
    lost = await lost_turns(client, agent_id, conversation)
    seconds["import_history"] = time.perf_counter() - start
    start = time.perf_counter()
    await insert_passages(client, agent_id, [[turn] for turn in conversation.turns])
    seconds["turn_passages"] = time.perf_counter() - start
    start = time.perf_counter()
    sessions = [chunk for number in sorted(conversation.sessions) for chunk in session_chunks(conversation.sessions[number])]
    session_agent_id = await create_passage_agent(client, conversation, settings, "sessions", sessions)
    seconds["session_passages"] = time.perf_counter() - start
    start = time.perf_counter()
    windows = [chunk for number in sorted(conversation.sessions) for chunk in window_chunks(conversation.sessions[number])]
    window_agent_id = await create_passage_agent(client, conversation, settings, "windows", windows)
    seconds["window_passages"] = time.perf_counter() - start
    seconds["wait_message_embeddings"] = await wait_embedded(pending, timeout)
    return Ingested(agent_id, session_agent_id, window_agent_id, {k: round(v, 2) for k, v in seconds.items()}, lost)
