"""GET /v1/models/ and /v1/models/embedding: the provider's list, the default model and the
handles agents use; an unreachable provider still gets an answer, with a note of what failed."""

from tests.support.api import app_client, create_agent


async def test_models_list_the_providers_models_the_default_and_the_agents_handles(settings, llm):
    tuned = settings.model_copy(update={"default_model": "openai/house-default"})
    async with app_client(tuned) as client:
        await create_agent(client, model="ollama/llama3")
        listed = await client.get("/v1/models/")

    handles = [model["handle"] for model in listed.json()]
    assert listed.status_code == 200 and "x-memvm-provider-errors" not in listed.headers
    assert handles == ["openai/scripted-model", "openai/house-default", "ollama/llama3"]
    [ollama] = [m for m in listed.json() if m["handle"] == "ollama/llama3"]
    assert ollama["provider_type"] == "ollama" and ollama["name"] == "llama3" and ollama["context_window"] > 0


async def test_an_unreachable_provider_leaves_what_memvm_knows_and_a_note(settings):
    dead = settings.model_copy(update={"openai_base_url": "http://127.0.0.1:9/v1", "default_model": "openai/house-default"})
    async with app_client(dead) as client:
        listed = await client.get("/v1/models/")

    assert listed.status_code == 200 and [m["handle"] for m in listed.json()] == ["openai/house-default"]
    assert "127.0.0.1:9" in listed.headers["x-memvm-provider-errors"]


async def test_embedding_models_list_the_local_model(client):
    listed = (await client.get("/v1/models/embedding")).json()

    local = listed[0]
    assert local["handle"] == "local/all-MiniLM-L6-v2" and local["embedding_dim"] == 384
    assert "openai/text-embedding-3-small" in [m["handle"] for m in listed]
