"""open_files and semantic_search_files driven through the step loop (grep_files: test_file_grep.py):
the scripted model calls the tool, then answers; the tool result is compared with Letta's text. And
the three file tools coming with an agent's first folder and going with its last."""

import pytest

from tests.support.api import create_agent
from tests.support.folder_files import CODE, GUIDE, Setup, add_file, agent_with_folder, failed, ok

FILE_TOOLS = {"open_files", "grep_files", "semantic_search_files"}


async def tool_names(client, agent_id) -> set[str]:
    response = await client.get(f"/v1/agents/{agent_id}/tools")
    assert response.status_code == 200, response.text
    return {tool["name"] for tool in response.json()}


# --------------------------------------------------------------------------- semantic_search_files

TEA = "\n".join(
    [
        "# Tea",
        "Green tea wants water at 80 degrees.",
        "Steep it for two minutes, no longer.",
        "# Storage",
        "Keep the leaves in a dark, dry tin.",
        "They stay fresh for about a year.",
    ]
)
BIKES = "\n".join(["# Bikes", "Oil the chain every month.", "Check the tire pressure weekly."])


async def test_semantic_search_answers_passages_with_file_and_lines(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/tea.md", TEA, max_chars=80)
    await add_file(sessionmaker, setup, "docs/bikes.md", BIKES, max_chars=80)

    text = await ok(client, llm, setup.agent_id, "semantic_search_files", {"query": "how long to steep green tea", "limit": 2})

    summary = "Found 2 semantic matches in 1 file for query: 'how long to steep green tea'"
    assert text == "\n".join(
        [
            summary,
            "=" * len(summary),
            "\n=== docs/tea.md:1-3 (passage #1) ===",
            "  # Tea\n  Green tea wants water at 80 degrees.\n  Steep it for two minutes, no longer.",
            "\n=== docs/tea.md:4-6 (passage #2) ===",
            "  # Storage\n  Keep the leaves in a dark, dry tin.\n  They stay fresh for about a year.",
        ]
    )


async def test_semantic_search_embeds_the_query_with_the_folders_model_not_the_agents(client, llm, db, sessionmaker):
    """The agent embeds with the scripted endpoint's model, its folder with the local one: only the
    folder's model finds a passage that shares no word with the query."""
    agent = await create_agent(client, model="openai/scripted-model", embedding="openai/text-embedding-3-small")
    folder = (await client.post("/v1/folders/", json={"name": "docs"})).json()
    await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{folder['id']}")
    organization_id = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
    setup = Setup(agent["id"], folder["id"], organization_id)
    await add_file(sessionmaker, setup, "docs/tea.md", TEA, max_chars=80)
    await add_file(sessionmaker, setup, "docs/bikes.md", BIKES, max_chars=80)

    text = await ok(client, llm, setup.agent_id, "semantic_search_files", {"query": "bicycle upkeep", "limit": 1})

    assert text.splitlines()[:3] == [
        "Found 1 semantic matches in 1 file for query: 'bicycle upkeep'",
        "=" * 62,
        "",
    ]
    assert "=== docs/bikes.md:1-3 (passage #1) ===" in text


async def test_semantic_search_finds_chunks_not_yet_embedded_by_their_words(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/bikes.md", BIKES, max_chars=80, embed=False)

    found = await ok(client, llm, setup.agent_id, "semantic_search_files", {"query": "tire pressure"})
    missing = await ok(client, llm, setup.agent_id, "semantic_search_files", {"query": "submarine"})

    assert found.startswith("Found 1 semantic matches in 1 file for query: 'tire pressure'")
    assert "=== docs/bikes.md:1-3 (passage #1) ===" in found
    assert missing == "No semantic matches found for query: 'submarine'"


async def test_file_hits_become_the_most_recently_used_files(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    tea = await add_file(sessionmaker, setup, "docs/tea.md", TEA, max_chars=80)
    bikes = await add_file(sessionmaker, setup, "docs/bikes.md", BIKES, max_chars=80)

    await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "leaves"})
    after_grep = await last_used(db, setup.agent_id)
    await ok(client, llm, setup.agent_id, "semantic_search_files", {"query": "oil the chain", "limit": 1})

    assert after_grep == [bikes, tea] and await last_used(db, setup.agent_id) == [tea, bikes]


async def last_used(db, agent_id) -> list[str]:
    """The agent's file ids, least recently used first."""
    rows = await db.fetch("SELECT file_id FROM agent_file WHERE agent_id = $1 ORDER BY last_accessed_at, id", agent_id)
    return [row["file_id"] for row in rows]


# --------------------------------------------------------------------------- open_files


async def test_open_files_says_what_it_opened_and_what_was_in_view_before(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)
    await add_file(sessionmaker, setup, "docs/main.py", CODE)
    guide = {"file_name": "docs/guide.md", "offset": 1, "length": 2}

    first = await ok(client, llm, setup.agent_id, "open_files", {"file_requests": [guide]})
    again = await ok(client, llm, setup.agent_id, "open_files", {"file_requests": [{"file_name": "docs/guide.md", "offset": 3}]})
    both = await ok(client, llm, setup.agent_id, "open_files", {"file_requests": [{"file_name": "docs/main.py"}, guide]})
    alone = await ok(
        client, llm, setup.agent_id, "open_files", {"file_requests": [{"file_name": "docs/main.py"}], "close_all_others": True}
    )

    assert first == "* Opened docs/guide.md (lines 2-3)"
    assert again == "* Opened docs/guide.md (lines 4-end) (previously lines 2-3)"
    assert both == "* Opened 2 files: docs/main.py, docs/guide.md (lines 2-3) (previously lines 4-6)"
    assert alone == (
        "* Opened docs/main.py (previously lines 1-4)\nNote: Closed 1 file(s) due to close_all_others=True: docs/guide.md"
    )
    view = await db.fetchrow("SELECT is_open, start_line, end_line FROM agent_file WHERE is_open")
    assert tuple(view) == (True, 1, 4)


async def test_open_files_closes_the_least_recently_used_beyond_the_limit(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)
    await add_file(sessionmaker, setup, "docs/main.py", CODE)
    await db.execute("UPDATE agent SET max_files_open = 1 WHERE id = $1", setup.agent_id)

    await ok(client, llm, setup.agent_id, "open_files", {"file_requests": [{"file_name": "docs/guide.md"}]})
    text = await ok(client, llm, setup.agent_id, "open_files", {"file_requests": [{"file_name": "docs/main.py"}]})
    too_many = await failed(
        client,
        llm,
        setup.agent_id,
        "open_files",
        {"file_requests": [{"file_name": "docs/guide.md"}, {"file_name": "docs/main.py"}]},
    )

    assert text == "* Opened docs/main.py\nNote: Closed 1 least recently used file(s) due to open file limit: docs/guide.md"
    assert too_many == "Cannot open 2 files: exceeds configured maximum limit of 1 files"


async def test_open_files_says_which_lines_fit_when_not_all_do(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/list.txt", "\n".join(f"item {n}" for n in range(1, 201)), max_chars=400)
    await db.execute("UPDATE agent SET per_file_view_window_char_limit = 600 WHERE id = $1", setup.agent_id)

    text = await ok(client, llm, setup.agent_id, "open_files", {"file_requests": [{"file_name": "docs/list.txt", "offset": 9}]})

    start, end = await db.fetchrow("SELECT start_line, end_line FROM agent_file WHERE is_open")
    assert start == 10 and 10 < end < 200
    assert text == f"* Opened docs/list.txt (lines 10-end) (lines 10-{end} in view: the rest did not fit)"


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (
            {"file_name": "guide.md"},
            "guide.md not attached - did you get the filename correct? Currently you have the following files attached: "
            "['docs/guide.md']",
        ),
        (
            {"file_name": "docs/guide.md", "offset": 6},
            "File docs/guide.md has only 6 lines, but requested offset 7 is out of range",
        ),
        ({"file_name": "docs/guide.md", "offset": -1}, "Offset for file docs/guide.md must be an integer >= 0, got -1"),
        ({"file_name": "docs/guide.md", "length": 0}, "Length for file docs/guide.md must be an integer >= 1, got 0"),
        ({"name": "docs/guide.md"}, "file_requests[0] must be an object with a string file_name (and optional offset, length)."),
        (
            {"file_name": "docs/guide.md", "lines": 3},
            "file_requests[0] has unknown keys ['lines']; the keys are file_name, offset and length.",
        ),
    ],
)
async def test_open_files_errors_name_what_to_fix_and_open_nothing(client, llm, db, sessionmaker, request_, error):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)

    text = await failed(client, llm, setup.agent_id, "open_files", {"file_requests": [request_]})

    assert text == error
    assert await db.fetchval("SELECT count(*) FROM agent_file WHERE is_open") == 0


# --------------------------------------------------------------------------- the tools come and go with folders


async def test_the_first_folder_brings_the_file_tools_and_the_last_takes_them_away(client, db):
    agent = await create_agent(client, model="openai/scripted-model")
    docs, notes = [(await client.post("/v1/folders/", json={"name": name})).json()["id"] for name in ("docs", "notes")]
    before = await tool_names(client, agent["id"])

    await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{docs}")
    with_one = await tool_names(client, agent["id"])
    await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{notes}")
    await client.patch(f"/v1/agents/{agent['id']}/folders/detach/{docs}")
    with_notes_left = await tool_names(client, agent["id"])
    await client.patch(f"/v1/agents/{agent['id']}/folders/detach/{notes}")

    assert not before & FILE_TOOLS
    assert with_one == before | FILE_TOOLS and with_notes_left == with_one
    assert await tool_names(client, agent["id"]) == before
    assert await db.fetchval("SELECT count(*) FROM agent_tool WHERE agent_id = $1", agent["id"]) == len(before)
