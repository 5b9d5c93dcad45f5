"""Hybrid conversation search and the embedding queue, with the real offline model."""

import json
from datetime import UTC

from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.ids import new_id
from memvm.search.conversation import MAX_LEXEMES, query_lexemes
from tests.support.api import create_agent
from tests.support.embedding import wait_embedded
from tests.support.pg import next_seq

KEYWORD_ONLY = "Order XJ9000 shipped on Tuesday."
MEANING_ONLY = "My daughter has started taking violin classes."
DISTRACTORS = [
    "The weather was rainy all weekend.",
    "I need to renew my passport before summer.",
    "We had pasta with mushrooms for dinner.",
    "The car needs new tyres soon.",
]


async def add_messages(db, agent_id, texts, role="user", created_at=None):
    for text in texts:
        await db.execute(
            "INSERT INTO message (id, agent_id, role, kind, content, in_context, embed_attempts, created_at, organization_id,"
            " seq) VALUES ($1, $2, $3, 'message', $4, false, 0, coalesce($5, clock_timestamp()),"
            f" '{DEFAULT_ORGANIZATION_ID}', {next_seq('$2')})",
            new_id("message"),
            agent_id,
            role,
            text,
            created_at,
        )


async def search(client, **body):
    response = await client.post("/v1/agents/messages/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_hybrid_finds_what_fulltext_and_vector_each_miss(client, db):
    agent = await create_agent(client)
    await add_messages(db, agent["id"], [KEYWORD_ONLY, MEANING_ONLY, *DISTRACTORS])
    await wait_embedded(db, "message")
    query = "XJ9000 kid music lessons"

    fts = await search(client, query=query, agent_id=agent["id"], search_mode="fts", limit=2)
    vector = await search(client, query=query, agent_id=agent["id"], search_mode="vector", limit=1)
    hybrid = await search(client, query=query, agent_id=agent["id"], limit=2)

    assert [r["embedded_text"] for r in fts] == [KEYWORD_ONLY]  # no shared word with the violin message
    assert [r["embedded_text"] for r in vector] == [MEANING_ONLY]
    assert {r["embedded_text"] for r in hybrid} == {KEYWORD_ONLY, MEANING_ONLY}
    for result in hybrid:
        assert result["rrf_score"] > 0 and (result["fts_rank"] or result["vector_rank"])
    keyword_hit = next(r for r in hybrid if r["embedded_text"] == KEYWORD_ONLY)
    # Found by its word; the violin turn after it is read with it (context), so it may share that rank.
    assert keyword_hit["fts_rank"] is not None


async def test_full_text_ranks_a_rare_word_above_common_ones_deep_in_history(client, db):
    agent = await create_agent(client)
    await add_messages(db, agent["id"], ["The plumber fixed the boiler."])
    await add_messages(db, agent["id"], [f"meeting notes for project {n}" for n in range(80)])  # more than one lexeme window

    results = await search(client, query="boiler meeting notes", agent_id=agent["id"], search_mode="fts", limit=3)

    assert [r["embedded_text"] for r in results] == [
        "The plumber fixed the boiler.",
        "meeting notes for project 79",
        "meeting notes for project 78",
    ]
    assert [r["fts_rank"] for r in results] == [1, 2, 3]


async def test_full_text_reads_only_the_agent_s_entries_of_the_index(client, db):
    agents = [(await create_agent(client))["id"] for _ in range(3)]
    rows = [
        (new_id("message"), agents[n % 3], f"note {n} about the garden" + (" and the boiler" if n % 500 == 0 else ""))
        for n in range(3000)
    ]
    await db.executemany(
        "INSERT INTO message (id, agent_id, role, kind, content, in_context, embed_attempts, organization_id, seq)"
        f" VALUES ($1, $2, 'user', 'message', $3, false, 5, '{DEFAULT_ORGANIZATION_ID}', {next_seq('$2')})",
        rows,
    )  # 5 attempts: not queued for embedding
    await db.execute("ANALYZE message")

    explain_only = db.transaction()
    await explain_only.start()
    try:
        # This table is small enough for a scan of the agent's rows to look cheaper: take those paths away
        # (rolled back below) to see that the GIN index itself narrows to the agent.
        await db.execute("SET LOCAL enable_seqscan = off")
        await db.execute("SET LOCAL enable_indexscan = off")
        await db.execute("DROP INDEX ix_message_agent_id_created_at")
        plan = "\n".join(
            r[0]
            for r in await db.fetch(
                "EXPLAIN SELECT id FROM message WHERE agent_id = $1 AND kind = 'message' AND fts @@ 'boiler'::tsquery"
                " ORDER BY created_at DESC, seq DESC LIMIT 50",
                agents[0],
            )
        )
    finally:
        await explain_only.rollback()

    assert "ix_message_agent_id_fts" in plan, plan
    index_condition = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "agent_id" in index_condition and "fts" in index_condition


async def test_role_and_date_filters_and_limit(client, db):
    agent = await create_agent(client)
    await add_messages(db, agent["id"], ["I adopted a cat named Miso."], role="user", created_at=_day("2024-01-10"))
    await add_messages(db, agent["id"], ["Miso the cat sounds lovely."], role="assistant", created_at=_day("2024-03-10"))
    await add_messages(db, agent["id"], [f"cat fact {n}" for n in range(12)], role="user")
    await wait_embedded(db, "message")

    users = await search(client, query="cat Miso", agent_id=agent["id"], roles=["user"], limit=20)
    assistant = await search(client, query="cat Miso", agent_id=agent["id"], roles=["assistant"])
    early = await search(client, query="cat Miso", agent_id=agent["id"], end_date="2024-02-01")
    limited = await search(client, query="cat fact", agent_id=agent["id"], limit=5)

    assert all(r["message"]["role"] == "user" for r in users) and len(users) == 13
    assert [r["embedded_text"] for r in assistant] == ["Miso the cat sounds lovely."]
    assert [r["embedded_text"] for r in early] == ["I adopted a cat named Miso."]
    assert len(limited) == 5


async def test_sdk_search_route_shape(client, db):
    agent = await create_agent(client)
    await add_messages(db, agent["id"], ["The launch code word is pineapple."])
    await wait_embedded(db, "message")

    response = await client.post(
        "/v1/messages/search", json={"query": "what is the secret word?", "agent_id": agent["id"], "limit": 3}
    )

    [hit] = response.json()
    assert hit["message_type"] == "user_message" and hit["content"] == "The launch code word is pineapple."
    assert hit["agent_id"] == agent["id"] and hit["message_id"].startswith("message-")


async def test_search_is_scoped_to_the_agent(client, db):
    mine = await create_agent(client)
    other = await create_agent(client)
    await add_messages(db, other["id"], ["Secret recipe uses saffron."])
    await wait_embedded(db, "message")

    results = await search(client, query="saffron recipe", agent_id=mine["id"])

    assert results == []


async def test_turn_messages_are_embedded_after_commit(client, llm, db):
    agent = await create_agent(client, model="openai/scripted-model")
    llm.reply("Noted: you live in Lisbon.")

    await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "I moved to Lisbon last year"})
    await wait_embedded(db, "message")

    rows = await db.fetch("SELECT role, embedding_model, embedding_dim FROM message ORDER BY seq")
    assert [(r["role"], r["embedding_model"], r["embedding_dim"]) for r in rows] == [
        ("user", "local/all-MiniLM-L6-v2", 384),
        ("assistant", "local/all-MiniLM-L6-v2", 384),
    ]


async def test_conversation_search_tool_uses_meaning(client, llm, db):
    agent = await create_agent(client, model="openai/scripted-model")
    await add_messages(db, agent["id"], [MEANING_ONLY, *DISTRACTORS])
    await wait_embedded(db, "message")
    llm.reply(tool_calls=[("conversation_search", {"query": "what instrument is the kid learning?", "limit": 1})]).reply(
        "Violin!"
    )

    body = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "remind me about my kid"})).json()

    result = json.loads(body["messages"][1]["tool_return"])
    assert [r["content"] for r in result["results"]] == [MEANING_ONLY]


async def test_no_results_is_distinguishable_from_an_error(client, llm):
    agent = await create_agent(client, model="openai/scripted-model")
    llm.reply(
        tool_calls=[("conversation_search", {"query": "zebra"}), ("conversation_search", {"query": "x", "roles": ["robot"]})]
    )
    llm.reply("nothing there")

    body = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "anything about zebras?"})).json()

    empty, failed = [m for m in body["messages"] if m["message_type"] == "tool_return_message"]
    assert empty["status"] == "success" and json.loads(empty["tool_return"]) == {"message": "No results found.", "results": []}
    assert failed["status"] == "error" and "Unknown role" in failed["tool_return"]


def _day(text):
    from datetime import datetime

    return datetime.fromisoformat(text).replace(tzinfo=UTC)


async def test_query_lexemes_keep_the_query_order_without_stop_words_and_are_capped(database_url):
    engine = create_async_engine(database_url)
    try:
        async with AsyncSession(engine) as session:
            ordered = await query_lexemes(session, "Zebras and the wedding of my sister; zebras again")
            stop_words_only = await query_lexemes(session, "what is it and the")
            long = await query_lexemes(session, " ".join(f"word{n}x" for n in range(MAX_LEXEMES + 5)))
    finally:
        await engine.dispose()

    assert ordered == ["zebra", "wed", "sister"]
    assert stop_words_only == []
    assert long == [f"word{n}x" for n in range(MAX_LEXEMES)]


async def _talk(client, llm, agent_id, text, conversation_id=None):
    """One turn in the agent's default conversation, or in `conversation_id`."""
    llm.reply("Noted.")
    if conversation_id is None:
        response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": text})
    else:
        response = await client.post(f"/v1/conversations/{conversation_id}/messages", json={"input": text, "streaming": False})
    assert response.status_code == 200, response.text


async def _conversation(client, agent_id):
    response = await client.post("/v1/conversations/", params={"agent_id": agent_id})
    assert response.status_code == 200, response.text
    return response.json()["id"]


async def test_sdk_search_filters_by_conversation_and_says_where_each_hit_is(client, llm):
    agent = (await create_agent(client, model="openai/scripted-model"))["id"]
    thread = await _conversation(client, agent)
    await _talk(client, llm, agent, "My zucchini grew huge at home.")
    await _talk(client, llm, agent, "Zucchini soup tonight in this thread.", thread)

    async def found(**filters):
        body = {"query": "zucchini", "search_mode": "fts", **filters}
        response = await client.post("/v1/messages/search", json=body)
        assert response.status_code == 200, response.text
        return {(hit["content"], hit["conversation_id"]) for hit in response.json()}

    everywhere = {("My zucchini grew huge at home.", None), ("Zucchini soup tonight in this thread.", thread)}
    assert await found(agent_id=agent) == everywhere
    assert await found() == everywhere
    assert await found(agent_id=agent, conversation_id="default") == {("My zucchini grew huge at home.", None)}
    assert await found(conversation_id=thread) == {("Zucchini soup tonight in this thread.", thread)}
    assert await found(agent_id=agent, conversation_id=thread) == {("Zucchini soup tonight in this thread.", thread)}


async def test_ranked_search_filters_by_conversation_too(client, llm):
    agent = (await create_agent(client, model="openai/scripted-model"))["id"]
    thread = await _conversation(client, agent)
    await _talk(client, llm, agent, "Paprika in the default one.")
    await _talk(client, llm, agent, "Paprika in the thread.", thread)

    only_thread = await search(client, query="paprika", search_mode="fts", agent_id=agent, conversation_id=thread)
    only_default = await search(client, query="paprika", search_mode="fts", agent_id=agent, conversation_id="default")

    def where(results):
        return [(r["embedded_text"], r["message"]["conversation_id"]) for r in results]

    assert where(only_thread) == [("Paprika in the thread.", thread)]
    assert where(only_default) == [("Paprika in the default one.", None)]


async def test_search_by_conversation_refuses_what_names_no_conversation(client, llm):
    mine = (await create_agent(client, model="openai/scripted-model"))["id"]
    other = (await create_agent(client))["id"]
    thread = await _conversation(client, mine)
    unknown = "conv-00000000-0000-4000-8000-000000000000"

    without_agent = await client.post("/v1/messages/search", json={"query": "x", "conversation_id": "default"})
    wrong_agent = await client.post("/v1/messages/search", json={"query": "x", "agent_id": other, "conversation_id": thread})
    missing = await client.post("/v1/messages/search", json={"query": "x", "conversation_id": unknown})
    not_an_id = await client.post("/v1/agents/messages/search", json={"query": "x", "conversation_id": "conv-nope"})

    assert without_agent.status_code == 400 and "agent_id" in without_agent.json()["detail"]
    assert wrong_agent.status_code == 400 and other in wrong_agent.json()["detail"]
    assert missing.status_code == 404 and unknown in missing.json()["detail"]
    assert not_an_id.status_code == 404
