"""Organization-wide lists: GET /v1/tags/ (every tag of the organization's agents and blocks) and
GET /v1/messages/ (every agent's messages), with the SDK's filters and cursors."""

import pytest

from tests.support.api import create_agent, create_block

MODEL = {"model": "openai/scripted-model"}


async def tags(client, **params) -> list[str]:
    response = await client.get("/v1/tags/", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_tags_are_those_of_agents_and_blocks_once_each_in_name_order(client):
    await create_agent(client, tags=["travel", "Support", "vip"])
    await create_agent(client, tags=["travel", "beta"])
    await create_block(client, tags=["vip", "archive_2024"])

    assert await tags(client) == ["Support", "archive_2024", "beta", "travel", "vip"]
    assert await tags(client, order="desc") == ["vip", "travel", "beta", "archive_2024", "Support"]
    assert await tags(client, limit=2) == ["Support", "archive_2024"]
    assert await tags(client, after="archive_2024", limit=2) == ["beta", "travel"]
    assert await tags(client, before="travel") == ["Support", "archive_2024", "beta"]
    assert await tags(client, order="desc", after="travel") == ["beta", "archive_2024", "Support"]
    assert await tags(client, name="VI") == ["vip"]
    assert await tags(client, name="e") == ["archive_2024", "beta", "travel"]
    assert await tags(client, query_text="SUP") == ["Support"]
    assert await tags(client, name="_2") == ["archive_2024"]  # LIKE's wildcards are literal
    assert await tags(client, name="%") == []


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"order": "random"}, {"order_by": "created_at"}])
async def test_bad_tag_paging_is_a_422(client, params):
    response = await client.get("/v1/tags/", params=params)

    assert response.status_code == 422 and "query" in response.json()["detail"]


async def send(client, llm, agent_id: str, text: str, headers=None) -> list[dict]:
    llm.reply(f"About {text}.")
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": text}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["messages"]


async def test_messages_of_every_agent_newest_first_with_the_sdk_s_filters(client, llm):
    tea, coffee = (await create_agent(client, **MODEL))["id"], (await create_agent(client, **MODEL))["id"]
    await send(client, llm, tea, "tea")
    await send(client, llm, coffee, "coffee")
    thread = (await client.post("/v1/conversations/", params={"agent_id": tea})).json()["id"]
    llm.reply("About cake.")
    await client.post(f"/v1/conversations/{thread}/messages", json={"input": "cake", "streaming": False})

    newest = (await client.get("/v1/messages/")).json()
    oldest = (await client.get("/v1/messages/", params={"order": "asc", "limit": 2})).json()
    after = (await client.get("/v1/messages/", params={"order": "asc", "after": oldest[-1]["id"]})).json()
    before = (await client.get("/v1/messages/", params={"before": newest[4]["id"], "limit": 2})).json()
    in_thread = (await client.get("/v1/messages/", params={"conversation_id": thread})).json()
    said = (await client.get("/v1/messages/", params={"include_return_message_types": "assistant_message"})).json()

    texts = [m.get("content") for m in newest if m["message_type"] in ("user_message", "assistant_message")]
    assert texts == ["About cake.", "cake", "About coffee.", "coffee", "About tea.", "tea"]
    assert [m["content"] for m in oldest] == ["tea", "About tea."]
    assert [m["content"] for m in after] == ["coffee", "About coffee.", "cake", "About cake."]
    assert [m["id"] for m in before] == [m["id"] for m in newest[2:4]]  # the page nearest the cursor
    assert [m["content"] for m in in_thread] == ["About cake.", "cake"]
    assert [m["content"] for m in said] == ["About cake.", "About coffee.", "About tea."]


async def test_bad_message_paging_is_a_4xx(client):
    unknown = "message-00000000-0000-4000-8000-000000000000"

    assert (await client.get("/v1/messages/", params={"after": unknown})).status_code == 404
    assert (await client.get("/v1/messages/", params={"limit": 0})).status_code == 422
    assert (await client.get("/v1/messages/", params={"order": "sideways"})).status_code == 422


async def test_another_organization_s_tags_and_messages_are_not_seen(keyed, llm):
    client, (a, b) = keyed
    a_agent = (await client.post("/v1/agents/", json={**MODEL, "tags": ["a-secret"]}, headers=a)).json()["id"]
    [a_message, *_] = await send(client, llm, a_agent, "a's secret", headers=a)
    a_thread = (await client.post("/v1/conversations/", params={"agent_id": a_agent}, headers=a)).json()["id"]
    await client.post("/v1/agents/", json={"tags": ["b-own"]}, headers=b)

    b_tags = (await client.get("/v1/tags/", headers=b)).json()
    b_messages = (await client.get("/v1/messages/", headers=b)).json()
    b_after_a = await client.get("/v1/messages/", params={"after": a_message["id"]}, headers=b)
    b_in_a_thread = (await client.get("/v1/messages/", params={"conversation_id": a_thread}, headers=b)).json()

    assert b_tags == ["b-own"] and b_messages == [] and b_in_a_thread == []
    assert b_after_a.status_code == 404
    assert (await client.get("/v1/tags/", headers=a)).json() == ["a-secret"]
