"""Conversations over HTTP: bad input is a clear 4xx that changes nothing, archived conversations
are read-only, another organization's are invisible, and the agent's own routes keep acting on its
default conversation alone. Behaviour seen through the SDK (concurrency, isolated blocks, fork,
compact, cancel, stream) is in tests/sdk/test_conversations.py."""

import pytest
from pydantic import SecretStr

from tests.support.api import app_client, compiled_prompt, create_agent, organization_keys

MODEL = {"model": "openai/scripted-model"}
UNKNOWN_AGENT = "agent-00000000-0000-4000-8000-000000000000"
UNKNOWN_CONVERSATION = "conv-00000000-0000-4000-8000-000000000000"
ADMIN_KEY = "admin-secret-for-conversation-tests"
TABLES = ("conversation", "conversation_block", "block", "message", "run")


async def new_conversation(client, agent_id, **body) -> str:
    response = await client.post("/v1/conversations/", params={"agent_id": agent_id}, json=body or None)
    assert response.status_code == 200, response.text
    return response.json()["id"]


async def talk(client, llm, conversation_id, text, **body) -> None:
    """One turn in the conversation; the model answers "Noted: <text>"."""
    llm.reply(f"Noted: {text}")
    response = await client.post(
        f"/v1/conversations/{conversation_id}/messages", json={"input": text, "streaming": False, **body}
    )
    assert response.status_code == 200, response.text


async def history(client, path, **params) -> list[dict]:
    response = await client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def texts(messages) -> list[str]:
    """What the user and the agent said, in order."""
    return [m["content"] for m in messages if m["message_type"] in ("user_message", "assistant_message")]


async def row_counts(db) -> dict[str, int]:
    return {table: await db.fetchval(f"SELECT count(*) FROM {table}") for table in TABLES}


def refused(response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert all(word in str(detail) for word in words), detail


@pytest.mark.parametrize(
    ("agent", "body", "status", "says"),
    [
        (UNKNOWN_AGENT, {}, 404, [UNKNOWN_AGENT]),
        ("mine", {"model": "gpt-4o-mini"}, 422, ["provider/model-name"]),
        ("mine", {"model": "openai/"}, 422, ["provider/model-name"]),
        ("mine", {"isolated_block_labels": ["human", "diary"]}, 400, ["'diary'", "human, persona"]),
    ],
    ids=["unknown agent", "handle without provider", "handle without model", "label the agent lacks"],
)
async def test_a_bad_create_is_refused_and_creates_nothing(client, db, agent, body, status, says):
    agent_id = (await create_agent(client))["id"] if agent == "mine" else agent
    before = await row_counts(db)

    response = await client.post("/v1/conversations/", params={"agent_id": agent_id}, json=body)

    refused(response, status, *says)
    assert await row_counts(db) == before


async def test_a_bad_model_handle_in_an_update_is_refused(client, db):
    conversation = await new_conversation(client, (await create_agent(client))["id"], model="openai/gpt-4o-mini")

    response = await client.patch(f"/v1/conversations/{conversation}", json={"model": "gpt-4o", "summary": "changed"})

    refused(response, 422, "provider/model-name")
    kept = await history(client, f"/v1/conversations/{conversation}")
    assert (kept["model"], kept["summary"]) == ("openai/gpt-4o-mini", None)


def thread_routes(conversation: str, agent_id: str | None) -> list[tuple[str, str, dict]]:
    """Every route that names a conversation and an agent, asked with `agent_id` (None: left out)."""
    query = {"params": {"agent_id": agent_id}} if agent_id else {}
    body = {"agent_id": agent_id} if agent_id else {}
    return [
        ("GET", f"/v1/conversations/{conversation}/messages", query),
        ("POST", f"/v1/conversations/{conversation}/messages", {"json": {"input": "hi", "streaming": False, **body}}),
        ("POST", f"/v1/conversations/{conversation}/messages", {"json": {"input": "hi", **body}}),  # streaming
        ("POST", f"/v1/conversations/{conversation}/stream", {"json": body}),
        ("POST", f"/v1/conversations/{conversation}/cancel", query),
        ("POST", f"/v1/conversations/{conversation}/recompile", {"json": body}),
        ("POST", f"/v1/conversations/{conversation}/compact", {"json": body}),
        ("POST", f"/v1/conversations/{conversation}/fork", query),
    ]


async def test_default_without_agent_id_is_400_everywhere(client, db):
    await create_agent(client, **MODEL)
    before = await row_counts(db)

    for method, path, request in thread_routes("default", None):
        refused(await client.request(method, path, **request), 400, "agent_id")

    assert await row_counts(db) == before


async def test_a_conversation_named_with_another_agent_is_400_everywhere(client, llm, db):
    owner = (await create_agent(client, **MODEL))["id"]
    stranger = (await create_agent(client, **MODEL))["id"]
    conversation = await new_conversation(client, owner)
    await talk(client, llm, conversation, "hello")
    before = await row_counts(db)

    for method, path, request in thread_routes(conversation, stranger):
        refused(await client.request(method, path, **request), 400, conversation, owner, stranger)
    listed = await client.get(f"/v1/agents/{stranger}/messages", params={"conversation_id": conversation})

    refused(listed, 400, conversation, owner)
    assert await row_counts(db) == before


async def test_an_unknown_conversation_is_404_everywhere(client, db):
    agent = (await create_agent(client, **MODEL))["id"]
    before = await row_counts(db)
    calls = [
        *thread_routes(UNKNOWN_CONVERSATION, None),
        ("GET", f"/v1/conversations/{UNKNOWN_CONVERSATION}", {}),
        ("PATCH", f"/v1/conversations/{UNKNOWN_CONVERSATION}", {"json": {"summary": "x"}}),
        ("DELETE", f"/v1/conversations/{UNKNOWN_CONVERSATION}", {}),
        ("GET", "/v1/conversations/", {"params": {"after": UNKNOWN_CONVERSATION}}),
        ("GET", f"/v1/agents/{agent}/messages", {"params": {"conversation_id": UNKNOWN_CONVERSATION}}),
        ("GET", f"/v1/agents/{agent}/messages", {"params": {"conversation_id": "not-a-conversation"}}),
    ]

    for method, path, request in calls:
        refused(await client.request(method, path, **request), 404)

    assert await row_counts(db) == before


async def test_fork_at_a_message_of_another_conversation_is_404_and_forks_nothing(client, llm, db):
    agent = (await create_agent(client, **MODEL))["id"]
    first, second = await new_conversation(client, agent), await new_conversation(client, agent)
    await talk(client, llm, first, "in the first")
    await talk(client, llm, second, "in the second")
    [elsewhere, *_] = await history(client, f"/v1/conversations/{first}/messages", order="asc")
    before = await row_counts(db)

    into_second = await client.post(f"/v1/conversations/{second}/fork", params={"message_id": elsewhere["id"]})
    into_default = await client.post("/v1/conversations/default/fork", params={"agent_id": agent, "message_id": elsewhere["id"]})

    refused(into_second, 404, elsewhere["id"], second)
    refused(into_default, 404, elsewhere["id"], agent)
    assert await row_counts(db) == before
    own = await client.post(f"/v1/conversations/{first}/fork", params={"message_id": elsewhere["id"]})
    assert own.status_code == 200, own.text
    assert texts(await history(client, f"/v1/conversations/{own.json()['id']}/messages")) == ["in the first"]


async def test_an_archived_conversation_refuses_writes_but_reads(client, llm, db):
    agent = (await create_agent(client, **MODEL))["id"]
    conversation = await new_conversation(client, agent)
    await talk(client, llm, conversation, "before archiving")
    archived = await client.patch(f"/v1/conversations/{conversation}", json={"archived": True})
    assert archived.status_code == 200 and archived.json()["archived"] is True
    before = await row_counts(db)

    sent = await client.post(f"/v1/conversations/{conversation}/messages", json={"input": "hi", "streaming": False})
    streamed = await client.post(f"/v1/conversations/{conversation}/messages", json={"input": "hi"})
    compacted = await client.post(f"/v1/conversations/{conversation}/compact")

    for response in (sent, streamed, compacted):
        refused(response, 409, "archived")
    assert await row_counts(db) == before
    assert llm.requests == [llm.requests[0]]  # the turn before archiving alone reached the model
    read = await history(client, f"/v1/conversations/{conversation}")
    assert read["archived"] is True and len(read["in_context_message_ids"]) == 2
    assert texts(await history(client, f"/v1/conversations/{conversation}/messages")) == [
        "before archiving",
        "Noted: before archiving",
    ]
    assert [c["id"] for c in await history(client, "/v1/conversations/", archive_status="archived")] == [conversation]
    assert await history(client, "/v1/conversations/", agent_id=agent) == []
    await client.patch(f"/v1/conversations/{conversation}", json={"archived": False})
    await talk(client, llm, conversation, "after unarchiving")


async def test_the_agent_s_routes_act_on_its_default_conversation_only(client, llm):
    agent = (await create_agent(client, **MODEL))["id"]
    conversation = await new_conversation(client, agent)
    await talk(client, llm, "default", "at home", agent_id=agent)
    await talk(client, llm, conversation, "in the thread")
    window = (await history(client, f"/v1/conversations/{conversation}"))["in_context_message_ids"]

    own = texts(await history(client, f"/v1/agents/{agent}/messages"))
    named_default = texts(await history(client, f"/v1/agents/{agent}/messages", conversation_id="default"))
    named_thread = texts(await history(client, f"/v1/agents/{agent}/messages", conversation_id=conversation))
    reset = await client.patch(f"/v1/agents/{agent}/reset-messages")

    assert own == named_default == ["at home", "Noted: at home"]
    assert named_thread == ["in the thread", "Noted: in the thread"]
    assert reset.status_code == 200 and reset.json()["message_ids"] == []
    assert (await history(client, f"/v1/conversations/{conversation}"))["in_context_message_ids"] == window


async def test_the_agent_s_recall_count_counts_its_default_conversation_only(client, llm):
    agent = (await create_agent(client, **MODEL))["id"]
    conversation = await new_conversation(client, agent)
    await talk(client, llm, "default", "at home", agent_id=agent)
    for n in range(3):
        await talk(client, llm, conversation, f"thread message {n}")
    llm.reply("The user said three things.")
    compacted = await client.post(f"/v1/conversations/{conversation}/compact")
    assert compacted.status_code == 200 and compacted.json()["num_messages_before"] == 6, compacted.text
    await client.patch(f"/v1/agents/{agent}/reset-messages")  # the default conversation's 2 leave its window

    agent_prompt = await compiled_prompt(client, agent)
    thread_prompt = (await client.post(f"/v1/conversations/{conversation}/recompile")).json()

    assert "- 2 previous messages between you and the user are stored in recall memory" in agent_prompt
    assert "- 6 previous messages between you and the user are stored in recall memory" in thread_prompt


async def test_the_default_conversations_recompile_answers_and_stores_the_prompt_of_the_blocks_as_they_are(client, db):
    agent = await create_agent(client, **MODEL, memory_blocks=[{"label": "human", "value": "Name: Ana"}])
    await db.execute(  # changed behind the server's back: only a recompile brings it into the prompt
        "UPDATE block SET value = 'Name: Bo' FROM agent_block"
        " WHERE agent_block.block_id = block.id AND agent_block.agent_id = $1",
        agent["id"],
    )

    answered = await client.post("/v1/conversations/default/recompile", json={"agent_id": agent["id"]})
    stored = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])

    assert answered.status_code == 200, answered.text
    assert "Name: Bo" in answered.json() and "Name: Ana" not in answered.json() and answered.json() == stored


@pytest.fixture
async def keyed(settings):
    """The app with access control on, and a key of organizations `a` and `b`."""
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY)})) as client:
        yield client, await organization_keys(client, ADMIN_KEY, "a", "b")


async def test_another_organization_s_conversation_is_404_when_named_in_a_query_or_body(keyed, llm):
    client, (a, b) = keyed
    a_agent = (await client.post("/v1/agents/", json=MODEL, headers=a)).json()["id"]
    a_conversation = (await client.post("/v1/conversations/", params={"agent_id": a_agent}, headers=a)).json()["id"]
    llm.reply("Noted.")
    await client.post(f"/v1/conversations/{a_conversation}/messages", json={"input": "secret", "streaming": False}, headers=a)
    [a_message, *_] = (await client.get(f"/v1/conversations/{a_conversation}/messages", headers=a)).json()
    b_agent = (await client.post("/v1/agents/", json=MODEL, headers=b)).json()["id"]
    b_conversation = (await client.post("/v1/conversations/", params={"agent_id": b_agent}, headers=b)).json()["id"]
    calls = [
        ("POST", "/v1/conversations/", {"params": {"agent_id": a_agent}}),
        ("GET", "/v1/conversations/", {"params": {"agent_id": a_agent}}),
        ("GET", "/v1/conversations/default/messages", {"params": {"agent_id": a_agent}}),
        ("POST", "/v1/conversations/default/messages", {"json": {"input": "hi", "streaming": False, "agent_id": a_agent}}),
        ("GET", f"/v1/agents/{b_agent}/messages", {"params": {"conversation_id": a_conversation}}),
        ("POST", "/v1/messages/search", {"json": {"query": "secret", "conversation_id": a_conversation}}),
        ("POST", f"/v1/conversations/{b_conversation}/fork", {"params": {"message_id": a_message["id"]}}),
    ]

    for method, path, request in calls:
        refused(await client.request(method, path, headers=b, **request), 404)

    listed = (await client.get("/v1/conversations/", headers=b)).json()
    assert [c["id"] for c in listed] == [b_conversation]
    assert len((await client.get(f"/v1/conversations/{a_conversation}/messages", headers=a)).json()) == 2


async def test_an_agent_id_in_the_conversation_s_place_must_be_the_agent_named(client, llm):
    mine = (await create_agent(client, **MODEL))["id"]
    other = (await create_agent(client, **MODEL))["id"]
    await talk(client, llm, "default", "only for the other agent", agent_id=other)
    search = {"query": "other agent", "search_mode": "fts"}

    calls = [
        await client.get(f"/v1/agents/{mine}/messages", params={"conversation_id": other}),
        await client.get(f"/v1/conversations/{other}/messages", params={"agent_id": mine}),
        await client.post("/v1/messages/search", json={**search, "agent_id": mine, "conversation_id": other}),
    ]

    for response in calls:
        refused(response, 400, mine, other)
    own = await history(client, f"/v1/conversations/{other}/messages", agent_id=other)
    assert texts(own) == ["only for the other agent", "Noted: only for the other agent"]
