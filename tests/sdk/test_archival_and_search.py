"""Archival memory, archives, and message search through the official SDK, against a real
`memvm serve` process (one per module) whose embeddings come from the real offline model, so
the searches below are answered by meaning: each query is a paraphrase sharing no keyword with
the passage or message it must find first.
"""

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from letta_client import AsyncLetta, NotFoundError
from letta_client.types import Passage

from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import MODEL, memory_value, new_agent, prompt_text, unique
from tests.support.serve import Served

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "sdk_quickstart.py"

# Facts with one paraphrased question each; no question shares a content word with its fact.
FACTS = {
    "violin": ("Bob's daughter Alice plays the violin in the school orchestra.", ["family", "music"]),
    "peanuts": ("Bob is allergic to peanuts and always carries an epinephrine pen.", ["health"]),
    "car": ("Bob drives a red 2012 Toyota Corolla to the office.", ["vehicle"]),
    "italy": ("Bob's favourite holiday destination is the Amalfi coast in Italy.", ["travel", "family"]),
}
QUESTIONS = {
    "violin": "Which musical instrument does his kid learn?",
    "peanuts": "What food must he avoid because of a medical reaction?",
    "car": "What automobile does he commute in?",
    "italy": "Where does he like to go on vacation?",
}
MESSAGE_SEARCH_WAIT = 15.0  # message embeddings are computed in the background after commit


async def store_facts(letta: AsyncLetta, agent_id: str) -> dict[str, Passage]:
    stored = {}
    for key, (text, tags) in FACTS.items():
        created = await letta.agents.passages.create(agent_id, text=text, tags=tags)
        assert isinstance(created, list) and len(created) == 1, created
        stored[key] = created[0]
    return stored


# ---------------------------------------------------------------- agent archival memory


async def test_agent_passages_create_list_search_delete(letta: AsyncLetta):
    agent = await new_agent(letta)

    stored = await store_facts(letta, agent.id)

    for key, passage in stored.items():
        assert isinstance(passage, Passage)
        assert passage.id and passage.id.startswith("passage-")
        assert passage.text == FACTS[key][0]
        assert sorted(passage.tags) == sorted(FACTS[key][1])
        assert passage.archive_id and passage.archive_id.startswith("archive-")
        assert passage.created_at is not None
    assert len({passage.archive_id for passage in stored.values()}) == 1  # the agent's default archive
    ids = {key: passage.id for key, passage in stored.items()}

    listed = await letta.agents.passages.list(agent.id)
    assert [p.id for p in listed] == list(ids.values())  # oldest first by default
    assert [p.text for p in listed] == [text for text, _ in FACTS.values()]
    newest = await letta.agents.passages.list(agent.id, ascending=False, limit=2)
    assert [p.id for p in newest] == [ids["italy"], ids["car"]]
    by_substring = await letta.agents.passages.list(agent.id, search="toyota")  # case-insensitive
    assert [p.id for p in by_substring] == [ids["car"]]

    # By meaning: every paraphrase finds its fact first, and top_k bounds the results.
    for key, question in QUESTIONS.items():
        found = await letta.agents.passages.search(agent.id, query=question, top_k=4)
        assert found.count == len(found.results) == 4
        assert found.results[0].id == ids[key], (question, [r.content for r in found.results])
        assert found.results[0].content == FACTS[key][0]
        assert sorted(found.results[0].tags) == sorted(FACTS[key][1])
        assert found.results[0].timestamp
    top_one = await letta.agents.passages.search(agent.id, query=QUESTIONS["car"], top_k=1)
    assert top_one.count == 1 and [r.id for r in top_one.results] == [ids["car"]]

    # Tag filters apply before top_k: "any" keeps both family facts, ranked by meaning.
    family = await letta.agents.passages.search(
        agent.id, query=QUESTIONS["italy"], tags=["family"], tag_match_mode="any", top_k=5
    )
    assert family.count == 2
    assert [r.id for r in family.results] == [ids["italy"], ids["violin"]]
    either = await letta.agents.passages.search(
        agent.id, query=QUESTIONS["peanuts"], tags=["health", "vehicle"], tag_match_mode="any", top_k=5
    )
    assert [r.id for r in either.results] == [ids["peanuts"], ids["car"]]
    both = await letta.agents.passages.search(
        agent.id, query=QUESTIONS["violin"], tags=["family", "travel"], tag_match_mode="all", top_k=5
    )
    assert both.count == 1 and [r.id for r in both.results] == [ids["italy"]]
    none = await letta.agents.passages.search(agent.id, query=QUESTIONS["car"], tags=["nope"], top_k=5)
    assert none.count == 0 and none.results == []

    deleted = await letta.agents.passages.delete(ids["peanuts"], agent_id=agent.id)

    assert deleted == {"message": f"Memory id={ids['peanuts']} successfully deleted"}
    assert [p.id for p in await letta.agents.passages.list(agent.id)] == [ids["violin"], ids["car"], ids["italy"]]
    after = await letta.agents.passages.search(agent.id, query=QUESTIONS["peanuts"], top_k=5)
    assert after.count == 3 and ids["peanuts"] not in [r.id for r in after.results]


async def test_memory_metadata_shows_archival_count_and_tags_never_content(letta: AsyncLetta):
    agent = await new_agent(letta)
    before = prompt_text(await letta.agents.recompile(agent.id))
    assert "<memory_metadata>" in before
    assert "archival memory" not in before

    await letta.agents.passages.create(agent.id, text="The vault code is 4711-zebra.", tags=["secrets", "bank"])
    await letta.agents.passages.create(agent.id, text="Bob's dentist is Dr. Quill on Elm Street.", tags=["health"])
    prompt = prompt_text(await letta.agents.recompile(agent.id))

    metadata = prompt[prompt.index("<memory_metadata>") : prompt.index("</memory_metadata>")]
    assert "- 2 total memories you created are stored in archival memory (use tools to access them)" in metadata
    assert "- Available archival memory tags: bank, health, secrets" in metadata
    assert "4711-zebra" not in prompt and "Dr. Quill" not in prompt
    assert memory_value(prompt, "human") == "Name: Bob"


# ---------------------------------------------------------------- archives


async def test_archive_create_list_retrieve_update_delete(letta: AsyncLetta):
    name = unique("kb")

    created = await letta.archives.create(name=name, description="Team knowledge")

    assert created.id.startswith("archive-")
    assert (created.name, created.description) == (name, "Team knowledge")
    assert created.embedding_config is not None and created.embedding_config.embedding_dim > 0
    assert created.embedding_config.embedding_model
    assert created.created_at is not None

    fetched = await letta.archives.retrieve(created.id)
    assert (fetched.id, fetched.name, fetched.description) == (created.id, name, "Team knowledge")
    assert [a.id async for a in letta.archives.list(name=name)] == [created.id]

    renamed = unique("kb-renamed")
    updated = await letta.archives.update(created.id, name=renamed, description="Shared team knowledge")
    assert (updated.id, updated.name, updated.description) == (created.id, renamed, "Shared team knowledge")
    again = await letta.archives.retrieve(created.id)
    assert (again.name, again.description) == (renamed, "Shared team knowledge")
    assert [a.id async for a in letta.archives.list(name=name)] == []
    assert [a.id async for a in letta.archives.list(name=renamed)] == [created.id]

    deleted = await letta.archives.delete(created.id)

    assert deleted is None
    with pytest.raises(NotFoundError) as raised:
        await letta.archives.retrieve(created.id)
    assert created.id in raised.value.body["detail"]
    assert [a.id async for a in letta.archives.list(name=renamed)] == []


async def test_archives_list_pages_and_filters_by_agent(letta: AsyncLetta):
    prefix = unique("paged")
    created = [(await letta.archives.create(name=f"{prefix}-{i}")).id for i in range(3)]
    agent = await new_agent(letta)
    await letta.agents.archives.attach(created[1], agent_id=agent.id)

    newest_first = [a.id async for a in letta.archives.list(limit=2)]
    assert newest_first[:3] == list(reversed(created))
    oldest_first = [a.id async for a in letta.archives.list(limit=2, order="asc")]
    assert [i for i in oldest_first if i in created] == created

    assert [a.id async for a in letta.archives.list(agent_id=agent.id)] == [created[1]]


async def test_archive_passages_create_create_many_delete(letta: AsyncLetta):
    archive = await letta.archives.create(name=unique("notes"))
    agent = await new_agent(letta)
    await letta.agents.archives.attach(archive.id, agent_id=agent.id)

    one = await letta.archives.passages.create(
        archive.id, text="The staging server reboots every Sunday at 3am.", tags=["ops"], metadata={"source": "wiki"}
    )
    many = await letta.archives.passages.create_many(
        archive.id,
        passages=[
            {"text": "Invoices are paid on the fifteenth of each month.", "tags": ["finance"]},
            {"text": "The office coffee machine is descaled on Fridays.", "tags": ["office", "ops"]},
        ],
    )

    assert isinstance(one, Passage)
    assert one.id.startswith("passage-") and one.archive_id == archive.id
    assert (one.text, one.tags, one.metadata) == ("The staging server reboots every Sunday at 3am.", ["ops"], {"source": "wiki"})
    assert [(p.text, sorted(p.tags), p.archive_id) for p in many] == [
        ("Invoices are paid on the fifteenth of each month.", ["finance"], archive.id),
        ("The office coffee machine is descaled on Fridays.", ["office", "ops"], archive.id),
    ]
    assert all(p.id.startswith("passage-") for p in many)
    listed = await letta.agents.passages.list(agent.id)
    assert [p.id for p in listed] == [one.id, many[0].id, many[1].id]
    found = await letta.agents.passages.search(agent.id, query="When do we settle our bills?", top_k=1)
    assert [r.id for r in found.results] == [many[0].id]

    deleted = await letta.archives.passages.delete(many[0].id, archive_id=archive.id)

    assert deleted is None
    assert [p.id for p in await letta.agents.passages.list(agent.id)] == [one.id, many[1].id]
    found = await letta.agents.passages.search(agent.id, query="When do we settle our bills?", top_k=5)
    assert many[0].id not in [r.id for r in found.results] and found.count == 2


async def test_shared_archive_attached_to_two_agents_is_searchable_from_both(letta: AsyncLetta):
    archive = await letta.archives.create(name=unique("shared"), description="Facts both agents read")
    facts = await letta.archives.passages.create_many(
        archive.id, passages=[{"text": text, "tags": tags} for text, tags in FACTS.values()]
    )
    ids = dict(zip(FACTS, (p.id for p in facts), strict=True))
    first = await new_agent(letta)
    second = await new_agent(letta)

    attached = [
        await letta.agents.archives.attach(archive.id, agent_id=first.id),
        await letta.agents.archives.attach(archive.id, agent_id=second.id),
    ]

    assert attached == [None, None]
    for agent in (first, second):
        found = await letta.agents.passages.search(agent.id, query=QUESTIONS["peanuts"], top_k=2)
        assert found.results[0].id == ids["peanuts"], [r.content for r in found.results]
        assert found.count == 2
        assert [a.id async for a in letta.archives.list(agent_id=agent.id)] == [archive.id]
    # A passage written through one agent's own archive stays private to it.
    [private] = await letta.agents.passages.create(first.id, text="Bob keeps a spare key under the blue flowerpot.")
    assert private.archive_id != archive.id
    hidden = await letta.agents.passages.search(second.id, query="Where is the extra house key?", top_k=5)
    assert private.id not in [r.id for r in hidden.results]
    shown = await letta.agents.passages.search(first.id, query="Where is the extra house key?", top_k=1)
    assert [r.id for r in shown.results] == [private.id]

    detached = await letta.agents.archives.detach(archive.id, agent_id=second.id)

    assert detached is None
    gone = await letta.agents.passages.search(second.id, query=QUESTIONS["peanuts"], top_k=5)
    assert gone.count == 0 and gone.results == []
    assert await letta.agents.passages.list(second.id) == []
    still = await letta.agents.passages.search(first.id, query=QUESTIONS["peanuts"], top_k=1)
    assert [r.id for r in still.results] == [ids["peanuts"]]
    assert (await letta.archives.retrieve(archive.id)).id == archive.id  # detaching keeps the archive


async def test_org_passage_search_by_archive_and_by_agent(letta: AsyncLetta):
    archive = await letta.archives.create(name=unique("org-search"))
    facts = await letta.archives.passages.create_many(
        archive.id, passages=[{"text": text, "tags": tags} for text, tags in FACTS.values()]
    )
    ids = dict(zip(FACTS, (p.id for p in facts), strict=True))
    agent = await new_agent(letta)
    await letta.agents.archives.attach(archive.id, agent_id=agent.id)

    in_archive = await letta.passages.search(query=QUESTIONS["car"], archive_id=archive.id, limit=2)
    assert len(in_archive) == 2
    assert in_archive[0].passage.id == ids["car"] and in_archive[0].passage.text == FACTS["car"][0]
    assert in_archive[0].score >= in_archive[1].score
    via_agent = await letta.passages.search(query=QUESTIONS["violin"], agent_id=agent.id, tags=["family"], limit=5)
    assert [hit.passage.id for hit in via_agent] == [ids["violin"], ids["italy"]]


# ---------------------------------------------------------------- message search


async def search_until(letta: AsyncLetta, wanted: str, **params):
    """Poll client.messages.search until a hit with message id `wanted` appears (bounded)."""
    deadline = time.monotonic() + MESSAGE_SEARCH_WAIT
    while True:
        hits = await letta.messages.search(**params)
        if any(hit.message_id == wanted for hit in hits) or time.monotonic() > deadline:
            return hits
        await asyncio.sleep(0.25)


async def converse(letta: AsyncLetta, llm: ScriptedLLM, agent_id: str, lines: list[str]) -> list[str]:
    """Send each line as one turn (the model answers blandly); the ids of the stored user messages."""
    for _ in lines:
        llm.reply("Okay.")
    for line in lines:
        await letta.agents.messages.create(agent_id, input=line)
    history = [m async for m in letta.agents.messages.list(agent_id, order="asc", limit=100)]
    users = {m.content: m.id for m in history if m.message_type == "user_message"}
    return [users[line] for line in lines]


async def test_messages_search_finds_an_earlier_user_message_by_meaning(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    other = await new_agent(letta)
    lines = [
        "My sister just adopted a golden retriever puppy named Biscuit.",
        "I am planning to repaint the kitchen a pale yellow this weekend.",
        "Work has been stressful because of the quarterly audit.",
    ]
    puppy, _, _ = await converse(letta, llm, agent.id, lines)
    [elsewhere] = await converse(letta, llm, other.id, ["My neighbour owns a labrador dog called Rex."])
    query = "Does anyone in my family have a new pet dog?"

    for mode in ("vector", "hybrid"):
        hits = await search_until(letta, puppy, query=query, agent_id=agent.id, search_mode=mode, limit=5)

        assert hits, f"{mode}: no hits within {MESSAGE_SEARCH_WAIT}s"
        best = hits[0]
        assert best.message_id == puppy, (mode, [(h.message_type, getattr(h, "content", None)) for h in hits])
        assert best.message_type == "user_message"
        assert best.content == lines[0]
        assert best.agent_id == agent.id
        assert best.created_at is not None
        assert elsewhere not in [h.message_id for h in hits]  # scoped to the agent
        assert len(hits) <= 5

    # Without agent_id the whole organisation is searched.
    everywhere = await search_until(letta, elsewhere, query=query, search_mode="vector", limit=100)
    assert {puppy, elsewhere} <= {h.message_id for h in everywhere}


async def test_messages_search_results_are_types_the_sdk_knows(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Collects antique pocket watches"})])
    llm.reply("What a lovely hobby.")
    await letta.agents.messages.create(agent.id, input="I collect antique pocket watches.")
    history = [m async for m in letta.agents.messages.list(agent.id, order="asc")]
    [user] = [m for m in history if m.message_type == "user_message"]
    assert any(m.message_type == "tool_return_message" for m in history)

    hits = await search_until(letta, user.id, query="antique pocket watches", agent_id=agent.id, search_mode="fts")

    assert user.id in [h.message_id for h in hits]
    known = {"system_message", "user_message", "reasoning_message", "assistant_message"}
    assert [h.message_type for h in hits if h.message_type not in known] == []


# ---------------------------------------------------------------- the quickstart example


async def test_quickstart_example_runs_against_memvm(memvm_server: Served, api_key: str, letta: AsyncLetta, llm: ScriptedLLM):
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Name: Ada", "new_string": "Name: Ada Lovelace"})])
    llm.reply("Nice to meet you, Ada Lovelace!")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MEMVM_", "LETTA_"))}
    env.update(MEMVM_URL=memvm_server.base_url, MEMVM_API_KEY=api_key, MEMVM_MODEL=MODEL, PYTHONUNBUFFERED="1")

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(QUICKSTART),
        cwd=str(REPO),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        raw_out, raw_err = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    out, err = raw_out.decode(), raw_err.decode()

    assert process.returncode == 0, f"exit {process.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    lines = out.splitlines()
    assert lines[0].startswith("Created agent agent-"), out
    agent_id = lines[0].split()[2]
    assert any(line.startswith("Stored archival passage passage-") for line in lines), out
    streamed = [line for line in lines if line.startswith("  [")]
    assert [line.split("]")[0] + "]" for line in streamed] == [
        "  [tool_call_message]",
        "  [tool_return_message]",
        "  [assistant_message]",
        "  [stop_reason]",
        "  [usage_statistics]",
    ], out
    assert "memory_replace(" in streamed[0] and "Ada Lovelace" in streamed[0]
    assert streamed[1].endswith("success")
    assert streamed[2] == "  [assistant_message] Nice to meet you, Ada Lovelace!"
    assert streamed[3] == "  [stop_reason] end_turn"
    assert "Human block: Name: Ada Lovelace" in lines
    assert "  human: Name: Ada Lovelace" in lines and any(line.startswith("  persona: ") for line in lines)

    # What the script printed is what the server holds.
    assert (await letta.agents.blocks.retrieve("human", agent_id=agent_id)).value == "Name: Ada Lovelace"
    stored = await letta.agents.passages.list(agent_id)
    assert len(stored) == 1 and stored[0].id in out
    sent = llm.requests[0]["messages"]
    assert sent[-1]["role"] == "user" and "Ada Lovelace" in sent[-1]["content"]
