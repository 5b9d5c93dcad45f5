"""The search_* settings of hybrid message search: the fusion constant, neighbour turns,
pseudo-relevance feedback and reading a message with its previous turn."""

import json

import pytest
from sqlalchemy import event, text

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.uow import transaction
from memvm.ids import new_id
from memvm.search.conversation import QueryVector, search_messages
from memvm.search.tuning import SearchTuning
from memvm.threads import ANY_CONVERSATION
from tests.support.api import app_client, create_agent
from tests.support.pg import next_seq

QUESTION = "Did the vet call back about Miso?"
ANSWER = "Yes: nothing serious, he will be fine in a week."  # no word of the query "vet Miso"


async def store(db, rows):
    """(agent id, text) pairs, stored in this order (as older history: not queued for embedding)."""
    await db.executemany(
        "INSERT INTO message (id, agent_id, role, kind, content, in_context, embed_attempts, organization_id, seq)"
        f" VALUES ($1, $2, 'user', 'message', $3, false, 5, '{DEFAULT_ORGANIZATION_ID}', {next_seq('$2')})",
        [(new_id("message"), agent_id, text) for agent_id, text in rows],
    )


async def hybrid_full_text(sessionmaker, agent_id, tuning, query="vet Miso"):
    """Hybrid search without a query vector: the full-text ranking, then the neighbours."""
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        hits = await search_messages(
            session, agent_ids=[agent_id], conversation_id=ANY_CONVERSATION, query=query, vector=None, limit=5, tuning=tuning
        )
    return [(hit.message.content, hit.score) for hit in hits]


async def store_question_and_answer(client, db) -> str:
    """An agent's sofa, QUESTION and ANSWER, another agent's note stored between the last two: the agent's id."""
    mine, other = (await create_agent(client))["id"], (await create_agent(client))["id"]
    await store(db, [(mine, "We bought a new sofa."), (mine, QUESTION), (other, "Unrelated note."), (mine, ANSWER)])
    return mine


async def test_the_turn_after_a_hit_comes_back_but_not_another_agent_s_message(client, db, sessionmaker):
    mine = await store_question_and_answer(client, db)

    found = await hybrid_full_text(sessionmaker, mine, SearchTuning(rrf_k=10, neighbour_weight=0.25, context_weight=0))
    without = await hybrid_full_text(sessionmaker, mine, SearchTuning(rrf_k=10, neighbour_weight=0, context_weight=0))

    assert [text for text, _ in without] == [QUESTION]
    assert found[0][0] == QUESTION and {text for text, _ in found[1:]} == {ANSWER, "We bought a new sofa."}
    question = found[0][1]
    assert question.rrf_score == pytest.approx(0.5 / 11)  # its neighbours matched nothing: it borrows nothing
    for _, neighbour in found[1:]:  # there by being next to the hit, with a quarter of its score
        assert neighbour.fts_rank is None and neighbour.vector_rank is None
        assert neighbour.rrf_score == pytest.approx(0.25 * question.rrf_score)


@pytest.mark.parametrize("context_weight", [0.0, 1.0])
async def test_a_hybrid_search_with_neighbours_takes_four_statements_and_sets_the_vector_search_up(
    client, db, sessionmaker, context_weight
):
    """Each statement is a round trip, and on a busy machine the round trips are much of what a search
    waits on: the query's lexemes with the vector search's settings, both rankings, the neighbours (and
    so the turns that context reads), the hits."""
    agent = (await create_agent(client))["id"]
    await store(db, [(agent, "We bought a new sofa."), (agent, QUESTION), (agent, ANSWER)])
    statements: list[str] = []

    def count(_connection, _cursor, statement, *_args) -> None:
        statements.append(statement)

    engine = sessionmaker.kw["bind"].sync_engine
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        event.listen(engine, "before_cursor_execute", count)
        try:
            hits = await search_messages(
                session,
                agent_ids=[agent],
                conversation_id=ANY_CONVERSATION,
                query="vet Miso",
                vector=QueryVector("local/all-MiniLM-L6-v2", 384, [0.1] * 384),
                limit=5,
                tuning=SearchTuning(context_weight=context_weight),
            )
        finally:
            event.remove(engine, "before_cursor_execute", count)
        ef_search = await session.scalar(text("SELECT current_setting('hnsw.ef_search')"))

    assert QUESTION in [hit.message.content for hit in hits]
    assert len(statements) == 4, statements
    assert "to_tsvector" in statements[0] and "set_config" in statements[0]
    assert ef_search == "100"  # set before the rankings' statement, for the rest of the transaction


async def test_the_fusion_constant_comes_from_the_settings(settings, db):
    scores = {}
    for k in (10, 60):
        async with app_client(settings.model_copy(update={"search_rrf_k": k})) as client:
            agent = await create_agent(client)
            await store(db, [(agent["id"], QUESTION)])
            response = await client.post(
                "/v1/agents/messages/search", json={"query": "vet", "agent_id": agent["id"], "search_mode": "fts"}
            )
            scores[k] = response.json()[0]["rrf_score"]

    assert scores == {10: pytest.approx(0.5 / 11), 60: pytest.approx(0.5 / 61)}


async def test_conversation_search_tool_ranks_with_the_settings(settings, llm, db):
    async with app_client(settings.model_copy(update={"search_rrf_k": 20, "search_neighbour_weight": 0})) as client:
        agent = await create_agent(client, model="openai/scripted-model")
        await store(db, [(agent["id"], QUESTION)])
        llm.reply(tool_calls=[("conversation_search", {"query": "vet", "limit": 1})]).reply("He called.")

        body = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "any news?"})).json()

    [result] = json.loads(body["messages"][1]["tool_return"])["results"]
    assert result["content"] == QUESTION
    assert result["relevance"] == round(0.5 / 21, 5)  # full text only: the stored message has no vector


HOMECOMING = "Miso came home from the shelter today."
CHECK_UP = "The shelter called to check on him."  # no word of the query "Miso", and not next to it


async def store_homecoming(db, mine, other):
    await store(
        db,
        [
            (mine, HOMECOMING),
            (mine, "We bought a new sofa."),
            (other, "The shelter is closed on Sundays."),
            (mine, CHECK_UP),
            (mine, "Unrelated note."),
        ],
    )


async def test_feedback_finds_a_turn_sharing_a_rare_word_with_the_best_hit_but_not_another_agent_s(client, db, sessionmaker):
    mine, other = (await create_agent(client))["id"], (await create_agent(client))["id"]
    await store_homecoming(db, mine, other)

    on = await hybrid_full_text(
        sessionmaker, mine, SearchTuning(neighbour_weight=0, feedback_terms=3, context_weight=0), query="Miso"
    )
    off = await hybrid_full_text(
        sessionmaker, mine, SearchTuning(neighbour_weight=0, feedback_terms=0, context_weight=0), query="Miso"
    )

    assert [text for text, _ in off] == [HOMECOMING]
    assert [text for text, _ in on] == [HOMECOMING, CHECK_UP]  # "shelter" lent; came/home/today match only the hit
    assert on[0][1].rrf_score == off[0][1].rrf_score  # the hit keeps its rank: the lent word weighs less


async def test_feedback_s_words_still_count_when_context_reranks_the_full_text(client, db, sessionmaker):
    mine, other = (await create_agent(client))["id"], (await create_agent(client))["id"]
    await store_homecoming(db, mine, other)

    found = await hybrid_full_text(sessionmaker, mine, SearchTuning(neighbour_weight=0, feedback_terms=3), query="Miso")

    assert {text for text, _ in found} >= {HOMECOMING, CHECK_UP}


async def test_the_feedback_setting_reaches_the_search_route(settings, db):
    update = {"search_feedback_terms": 3, "search_neighbour_weight": 0, "search_context_weight": 0}
    async with app_client(settings.model_copy(update=update)) as client:
        mine, other = (await create_agent(client))["id"], (await create_agent(client))["id"]
        await store_homecoming(db, mine, other)
        response = await client.post(
            "/v1/agents/messages/search", json={"query": "Miso", "agent_id": mine, "search_mode": "hybrid"}
        )

    assert [hit["embedded_text"] for hit in response.json()] == [HOMECOMING, CHECK_UP]


async def test_with_context_the_answer_matches_the_question_s_words_in_its_own_agent_only(client, db, sessionmaker):
    mine = await store_question_and_answer(client, db)

    on = await hybrid_full_text(sessionmaker, mine, SearchTuning(neighbour_weight=0, context_weight=0.5))
    off = await hybrid_full_text(sessionmaker, mine, SearchTuning(neighbour_weight=0, context_weight=0))

    assert [text for text, _ in off] == [QUESTION]
    # The answer follows the question in its agent's history (the other agent's note came between);
    # the sofa, before the question, is not read with it.
    assert [text for text, _ in on] == [QUESTION, ANSWER]
    answer = on[1][1]
    assert answer.fts_rank == 2 and answer.rrf_score == pytest.approx(0.5 / 12)  # ranked by its words, not lent


async def test_by_default_the_answer_matches_the_question_s_words(client, db, sessionmaker, settings):
    mine = await store_question_and_answer(client, db)

    found = dict(await hybrid_full_text(sessionmaker, mine, SearchTuning.of(settings)))

    assert SearchTuning.of(settings) == SearchTuning()  # the settings' defaults are the search's
    assert found[ANSWER].fts_rank is not None  # matched through the question, not only lent to as its neighbour


async def test_a_turn_found_through_context_lends_its_neighbour_share_back_to_the_match(client, db, sessionmaker):
    """The answer was not among the messages whose neighbours were read (it joined the candidates only
    through context), yet it is known to follow the question."""
    mine = await store_question_and_answer(client, db)

    found = dict(await hybrid_full_text(sessionmaker, mine, SearchTuning(neighbour_weight=0.25, context_weight=0.5)))

    answer = found[ANSWER]
    assert answer.fts_rank == 2 and answer.rrf_score == pytest.approx(0.5 / 12 + 0.25 * 0.5 / 11)
    assert found[QUESTION].rrf_score == pytest.approx(0.5 / 11 + 0.25 * 0.5 / 12)


async def test_the_context_setting_reaches_the_search_route(settings, db):
    async with app_client(settings.model_copy(update={"search_context_weight": 0.5, "search_neighbour_weight": 0})) as client:
        agent = (await create_agent(client))["id"]
        await store(db, [(agent, QUESTION), (agent, ANSWER)])
        response = await client.post(
            "/v1/agents/messages/search", json={"query": "vet Miso", "agent_id": agent, "search_mode": "hybrid"}
        )

    assert [hit["embedded_text"] for hit in response.json()] == [QUESTION, ANSWER]
