"""Which endpoint an agent's model calls go to, and with which key: an agent may name its own
OpenAI-compatible endpoint (Letta's llm_config / embedding_config), but the server's key never
leaves for an address a caller chose."""

from tests.support.api import create_agent
from tests.support.scripted_llm import ScriptedLLM

EMBEDDING_CONFIG = {
    "embedding_endpoint_type": "openai",
    "embedding_endpoint": "http://127.0.0.1:9/v1",
    "embedding_model": "text-embedding-3-small",
    "embedding_dim": 1536,
    "embedding_chunk_size": 300,
}


async def send(client, agent_id: str) -> None:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200, response.text


async def test_the_servers_key_goes_to_the_servers_endpoint_only(client, llm):
    async with ScriptedLLM() as elsewhere:
        own = await create_agent(client, model="openai/scripted-model")
        named = await create_agent(client, llm_config={"model": "their-model", "model_endpoint": elsewhere.base_url})
        llm.reply("from the server's endpoint")
        elsewhere.reply("from the agent's endpoint")

        await send(client, own["id"])
        await send(client, named["id"])

        assert llm.request_headers[0]["authorization"] == "Bearer test-key"
        assert elsewhere.requests[0]["model"] == "their-model"
        assert "test-key" not in elsewhere.request_headers[0]["authorization"]


async def test_an_openai_embedding_config_is_the_agents_embedding_model(client):
    agent = await create_agent(client, embedding_config=EMBEDDING_CONFIG)

    assert agent["embedding"] == "openai/text-embedding-3-small"
    assert agent["embedding_config"] == EMBEDDING_CONFIG  # kept as given, for clients that read it back


async def test_an_embedding_handle_wins_over_the_config_and_other_endpoint_types_stay_local(client):
    both = await create_agent(client, embedding="openai/text-embedding-3-large", embedding_config=EMBEDDING_CONFIG)
    hosted = await create_agent(
        client, embedding_config={"embedding_endpoint_type": "hugging-face", "embedding_model": "letta-free"}
    )

    assert both["embedding"] == "openai/text-embedding-3-large"
    assert hosted["embedding"] is None  # Letta's hosted model is out of reach: the local model embeds


async def test_changing_the_embedding_config_changes_the_model(client):
    agent = await create_agent(client)

    changed = await client.patch(f"/v1/agents/{agent['id']}", json={"embedding_config": EMBEDDING_CONFIG})

    assert changed.status_code == 200 and changed.json()["embedding"] == "openai/text-embedding-3-small"
