"""grep_files driven through the step loop: the scripted model calls it, then answers; the tool
result is compared with Letta's text, line numbers being the file's own."""

import pytest
from sqlalchemy import text as sql

from memvm.db.uow import transaction
from memvm.files import search
from memvm.files.chunking import chunk_lines
from tests.support.folder_files import CODE, GUIDE, add_file, agent_with_folder, call, failed, ok

RULE = "=" * 80


async def test_grep_shows_every_match_with_context_and_real_line_numbers(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)
    await add_file(sessionmaker, setup, "docs/main.py", CODE)

    text = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "todo"})

    assert text == "\n".join(
        [
            "Found 3 total matches across 2 files (showing matches 1-3 of 3)",
            RULE,
            "\nFiles with matches:",
            "  - docs/guide.md: 2 matches",
            "  - docs/main.py: 1 matches",
            "",
            "\n=== docs/guide.md:2 ===\n  1: # Guide\n> 2: TODO: write the intro\n  3: ",
            "\n=== docs/guide.md:5 ===\n  4: Setup is quick.\n> 5: Another todo here\n  6: The end.",
            "\n=== docs/main.py:2 ===\n  1: def main():\n> 2:     pass  # TODO remove\n  3: ",
            "",
            "No more matches to show.",
        ]
    )


async def test_grep_context_lines_and_anchors_work_per_line(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)

    text = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "^setup", "context_lines": 0})

    assert text.splitlines()[0] == "Found 1 total matches across 1 files (showing matches 1-1 of 1)"
    assert "\n=== docs/guide.md:4 ===\n> 4: Setup is quick.\n\nNo more matches to show." in text


async def test_grep_context_shows_blank_lines_that_no_chunk_holds(client, llm, db, sessionmaker):
    text = "\n".join(["top", *[""] * 40, "end of the file, thirty chars."])
    assert not any(chunk.start_line <= 41 <= chunk.end_line for chunk in chunk_lines(text, 30))  # blank runs are left out
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/sparse.txt", text)

    found = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "^end", "context_lines": 2})

    assert "\n=== docs/sparse.txt:42 ===\n  40: \n  41: \n> 42: end of the file, thirty chars.\n\n" in found


async def test_grep_takes_pythons_word_boundary(client, llm, db, sessionmaker):
    """PostgreSQL reads \\b as a backspace; the model means a word boundary, as in Letta's Python."""
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/words.txt", "category\ncat\nconcat")

    found = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": r"\bcat\b", "context_lines": 0})

    assert found.startswith("Found 1 total matches across 1 files (showing matches 1-1 of 1)\n")
    assert "\n=== docs/words.txt:2 ===\n> 2: cat\n" in found


async def test_grep_pages_twenty_matches_at_a_time(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/list.txt", "\n".join(f"item {n}" for n in range(1, 26)), max_chars=40)

    first = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": r"item \d+", "context_lines": 0})
    second = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": r"item \d+", "context_lines": 0, "offset": 20})

    assert first.startswith("Found 25 total matches across 1 files (showing matches 1-20 of 25)\n")
    assert "  - docs/list.txt: 25 matches" in first
    assert "=== docs/list.txt:20 ===\n> 20: item 20" in first and "docs/list.txt:21" not in first
    assert first.endswith('\nTo see more matches, call: grep_files(pattern="item \\d+", offset=20)')
    assert second.startswith("Found 25 total matches across 1 files (showing matches 21-25 of 25)\n")
    assert "=== docs/list.txt:21 ===\n> 21: item 21" in second and "docs/list.txt:20 " not in second
    assert second.endswith("\n=== docs/list.txt:25 ===\n> 25: item 25\n\nNo more matches to show.")
    past = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": r"item \d+", "offset": 40})
    assert past == "Offset 40 is past the last match (25 matches); use an offset below 25."


async def test_grep_collects_at_most_a_thousand_matches(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/x.txt", "\n".join(f"x{n}" for n in range(1, 1006)), max_chars=4000, embed=False)

    first = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "x", "context_lines": 0})
    last = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "x", "context_lines": 0, "offset": 980})

    assert first.startswith("Found 1000+ total matches across 1 files (showing matches 1-20 of 1000+)\n")
    assert "  - docs/x.txt: 1000 matches" in first
    assert first.endswith(
        '\nTo see more matches, call: grep_files(pattern="x", offset=20)\n'
        "Note: Only the first 1000 matches were collected. There may be more matches beyond this limit."
    )
    assert last.startswith("Found 1000+ total matches across 1 files (showing matches 981-1000 of 1000+)\n")
    assert last.endswith(
        "\n=== docs/x.txt:1000 ===\n> 1000: x1000\n\n"
        "Showing last page of collected matches. There may be more matches beyond the collection limit."
    )


async def test_grep_shows_a_line_split_over_chunks_once_and_whole(client, llm, db, sessionmaker):
    long_line = "word " * 12 + "needle" + " tail" * 6
    assert len([chunk for chunk in chunk_lines(f"short\n{long_line}", 30) if chunk.start_line == 2]) > 2
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/long.txt", f"short\n{long_line}")

    found = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "needle|word|tail"})

    assert found.startswith("Found 1 total matches across 1 files (showing matches 1-1 of 1)\n")
    assert f"\n=== docs/long.txt:2 ===\n  1: short\n> 2: {long_line}\n\nNo more matches to show." in found


async def test_grep_include_takes_a_glob_or_a_regex(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)
    await add_file(sessionmaker, setup, "docs/main.py", CODE)

    by_glob = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "todo", "include": "*.py"})
    by_regex = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "todo", "include": r"guide\.MD$"})
    none = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "todo", "include": "*.txt"})
    nothing = await ok(client, llm, setup.agent_id, "grep_files", {"pattern": "absent", "include": "*.md"})

    assert by_glob.startswith("Found 1 total matches across 1 files") and "  - docs/main.py: 1 matches" in by_glob
    assert by_regex.startswith("Found 2 total matches across 1 files") and "docs/main.py" not in by_regex
    assert none == "No files match the filename pattern '*.txt' (filtered 2 files)"
    assert nothing == "No matches found for pattern: 'absent' in files matching '*.md'"


async def test_an_invalid_regex_is_the_tools_error_and_the_step_goes_on(client, llm, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)

    bad, good = await call(
        client, llm, setup.agent_id, ("grep_files", {"pattern": "intro("}), ("grep_files", {"pattern": "intro"})
    )

    assert bad["status"] == "error"
    assert bad["tool_return"] == (
        "Invalid regex pattern: parentheses () not balanced. Patterns use PostgreSQL's regular expression syntax."
    )
    assert good["status"] == "success" and good["tool_return"].startswith("Found 1 total matches")


@pytest.mark.parametrize(
    ("name", "args", "error"),
    [
        ("grep_files", {"pattern": "  "}, "Empty search pattern provided; pass a keyword or regular expression."),
        ("grep_files", {"pattern": "a" * 1001}, "Pattern too complex: 1001 chars > 1000 limit"),
        ("grep_files", {"pattern": "x", "include": "*" * 1001}, "Pattern too complex: 1001 chars > 1000 limit"),
        (
            "grep_files",
            {"pattern": "x", "context_lines": 51},
            "context_lines is at most 50 (got 51); open_files shows more of a file.",
        ),
        ("semantic_search_files", {"query": " "}, "Empty search query provided; pass what to look for."),
        ("semantic_search_files", {"query": "tea", "limit": 0}, "limit must be at least 1 (got 0)."),
    ],
)
async def test_bad_search_arguments_are_the_tools_errors(client, llm, db, sessionmaker, name, args, error):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE, embed=False)

    assert await failed(client, llm, setup.agent_id, name, args) == error


async def test_a_grep_over_its_time_limit_is_cancelled_by_the_database(client, llm, db, sessionmaker, monkeypatch):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/big.txt", "\n".join("ab" * 40 for _ in range(20000)), max_chars=4000, embed=False)
    monkeypatch.setattr(search, "GREP_TIMEOUT_SECONDS", 0.001)

    text = await failed(client, llm, setup.agent_id, "grep_files", {"pattern": "(a|b)*c"})

    assert text == (
        "The search took longer than 0.001 seconds and was cancelled; use a simpler pattern or narrow the files with include."
    )


async def test_grep_leaves_the_transactions_statement_timeout_as_it_was(client, db, sessionmaker):
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE)

    async with transaction(sessionmaker, setup.organization_id) as session:
        await session.execute(sql("SET LOCAL statement_timeout = '7s'"))
        found = await search.grep_files(session, setup.agent_id, "intro", include=None, context_lines=0, offset=0)
        after = await session.scalar(sql("SHOW statement_timeout"))

    assert found.startswith("Found 1 total matches") and after == "7s"
