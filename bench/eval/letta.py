"""Letta 0.16.8 as the second server of one run (`--letta-url`): which of the harness's methods it has,
and the agents' settings that make it embed with exactly memvm's model. Letta's embedding config is
an OpenAI-type endpoint, called with the openai client at `embedding_endpoint` (letta/llm_api/
openai_client.py); memvm's `POST /v1/embeddings` serves its local model there, so both servers store
and query the same vectors (Letta pads them to 4096 dimensions with zeros, which keeps every cosine)."""

from __future__ import annotations

from typing import Any

import httpx

from .ingest import SEARCH_TOOLS, AgentSettings

# The methods Letta answers through the same route as memvm: its tools, run by
# POST /v1/agents/{id}/tools/{name}/run (its ToolExecutionManager, the code path an agent's step takes).
LETTA_METHODS = ("conversation_search", "archival_turns", "archival_sessions", "archival_windows")
_CLOUD_ONLY = "Letta 0.16.8's POST /v1/agents/messages/search is cloud-only (it needs Turbopuffer)"
NOT_ON_LETTA = {
    "messages_fts": _CLOUD_ONLY,
    "messages_vector": _CLOUD_ONLY,
    "bm25": "the harness's own ranking over the turns, the same for every server",
}
# What the report says about how Letta's tools search when Turbopuffer is not configured.
LETTA_NOTES = (
    "Letta 0.16.8 without Turbopuffer (self-hosted): `conversation_search` is a substring match of the whole"
    " query (SQL ILIKE '%query%' over the message text, newest first; letta/services/message_manager.py),"
    " embeddings are not used; `archival_memory_search` orders passages by cosine distance alone (pgvector).",
)


def local_model(models: list[dict[str, Any]]) -> dict[str, Any]:
    """memvm's offline embedding model, from its GET /v1/models/embedding."""
    for model in models:
        if model.get("provider_name") == "local":
            return model
    raise RuntimeError(f"memvm lists no local embedding model: {[m.get('handle') for m in models]}")


async def letta_settings(memvm: httpx.AsyncClient, llm_url: str, embedding_url: str | None = None) -> AgentSettings:
    """The agents' embedding config (memvm's model at memvm's URL, or at `embedding_url`, a relay to it)
    and LLM config (the fake LLM: Letta needs one for an agent to exist; retrieval never calls it)."""
    response = await memvm.get("/v1/models/embedding")
    response.raise_for_status()
    model = local_model(response.json())
    embedding = {
        "embedding_endpoint_type": "openai",
        "embedding_endpoint": f"{(embedding_url or str(memvm.base_url)).rstrip('/')}/v1",
        "embedding_model": model["handle"],
        "embedding_dim": model["embedding_dim"],
        "embedding_chunk_size": 300,
        "handle": model["handle"],
    }
    llm = {"model": "fake-gpt", "model_endpoint_type": "openai", "model_endpoint": llm_url, "context_window": 32000}
    # No tools in the agent file (Letta refuses to import its core tools: their rows need a source_type
    # the file has no say in): the agents name both search tools instead, which Letta attaches (a
    # letta_v1_agent's base tools hold conversation_search but not archival_memory_search).
    return {"embedding_config": embedding, "llm_config": llm, "tool_ids": [], "tools": list(SEARCH_TOOLS)}


async def letta_facts(client: httpx.AsyncClient, settings: AgentSettings) -> dict[str, Any]:
    """Letta's version (its health route), and the embedding config its agents were given."""
    version = (await client.get("/v1/health/")).json().get("version")
    return {"letta_version": version, "embedding_config": settings["embedding_config"], "base_url": str(client.base_url)}
