"""Every built-in memory tool driven through the step loop: the scripted model calls the tool,
then answers in plain text to end the turn. Assertions look at the tool result the client sees,
the blocks over REST, the compiled prompt, the model's next request and the rows in the database."""

import asyncio
import json

import pytest

from tests.support.api import compiled_prompt, create_agent, create_block

MODEL = {"model": "openai/scripted-model"}
EDIT_TOOLS = ["core_memory_append", "core_memory_replace", "memory_rethink", "memory_apply_patch", "memory"]
LINE_NUMBER_ERROR = "line number prefix"
BANNER = (
    "# NOTE: Line numbers shown below (with arrows like '1→') are to help during editing. "
    "Do NOT include line number prefixes in your memory edit tool calls."
)


# --------------------------------------------------------------------------- helpers


async def make_agent(client, *, blocks=None, **fields) -> dict:
    """A letta_v1_agent with every memory tool attached (plus its defaults: memory_replace, memory_insert)."""
    fields = {**MODEL, "tools": EDIT_TOOLS, **fields}
    if blocks is not None:
        fields["memory_blocks"] = blocks
    return await create_agent(client, **fields)


async def send(client, agent_id, text="hi") -> dict:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": text}]})
    assert response.status_code == 200, response.text
    return response.json()


def returns_of(body) -> list[dict]:
    return [m for m in body["messages"] if m["message_type"] == "tool_return_message"]


async def call(client, llm, agent_id, name, args, *, answer="done") -> dict:
    """One turn: the model calls `name(args)`, then answers. Returns the tool_return_message."""
    llm.reply(tool_calls=[(name, args)]).reply(answer)
    body = await send(client, agent_id)
    assert body["stop_reason"]["stop_reason"] == "end_turn"
    [returned] = returns_of(body)
    return returned


def ok(returned) -> str:
    assert returned["status"] == "success", returned["tool_return"]
    return returned["tool_return"]


def failed(returned) -> str:
    assert returned["status"] == "error", returned["tool_return"]
    return returned["tool_return"]


async def blocks_of(client, agent_id) -> dict[str, dict]:
    response = await client.get(f"/v1/agents/{agent_id}/core-memory/blocks")
    assert response.status_code == 200, response.text
    return {block["label"]: block for block in response.json()}


async def value(client, agent_id, label) -> str:
    response = await client.get(f"/v1/agents/{agent_id}/core-memory/blocks/{label}")
    assert response.status_code == 200, response.text
    return response.json()["value"]


async def block_rows(db) -> int:
    return await db.fetchval("SELECT count(*) FROM block")


async def agent_changes(db) -> list:
    return await db.fetch(
        "SELECT change, label, value, actor_type, actor_id, step_id FROM block_change WHERE actor_type = 'agent'"
        " ORDER BY created_at, id"
    )


def sent_tool_result(llm, request_index) -> dict:
    """The last tool message of a request the model received, parsed."""
    tool_messages = [m for m in llm.requests[request_index]["messages"] if m["role"] == "tool"]
    return json.loads(tool_messages[-1]["content"])


# --------------------------------------------------------------------------- core_memory_append


async def test_core_memory_append_adds_a_new_line(client, llm, db):
    agent = await make_agent(client)

    returned = await call(client, llm, agent["id"], "core_memory_append", {"label": "human", "content": "Likes: tea"})

    assert "Memory block 'human' updated" in ok(returned)
    assert await value(client, agent["id"], "human") == "Name: Bob\nLikes: tea"
    assert "Name: Bob\nLikes: tea" in await compiled_prompt(client, agent["id"])
    [change] = await agent_changes(db)
    assert change["change"] == "update" and change["actor_id"] == agent["id"] and change["value"] == "Name: Bob\nLikes: tea"


async def test_core_memory_append_to_an_empty_block_has_no_leading_newline(client, llm):
    agent = await make_agent(client, blocks=[{"label": "notes", "value": ""}])

    ok(await call(client, llm, agent["id"], "core_memory_append", {"label": "notes", "content": "first note"}))

    assert await value(client, agent["id"], "notes") == "first note"


# --------------------------------------------------------------------------- core_memory_replace


async def test_core_memory_replace_replaces_every_occurrence(client, llm, db):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Pet: cat\nFavourite: cat\nNot a cat person"}])

    ok(
        await call(
            client, llm, agent["id"], "core_memory_replace", {"label": "human", "old_content": "cat", "new_content": "dog"}
        )
    )

    assert await value(client, agent["id"], "human") == "Pet: dog\nFavourite: dog\nNot a dog person"
    assert "Favourite: dog" in await compiled_prompt(client, agent["id"])
    assert [c["change"] for c in await agent_changes(db)] == ["update"]


async def test_core_memory_replace_of_missing_text_is_an_error(client, llm, db):
    agent = await make_agent(client)

    message = failed(
        await call(
            client,
            llm,
            agent["id"],
            "core_memory_replace",
            {"label": "human", "old_content": "Name: Alice", "new_content": "Name: Eve"},
        )
    )

    assert "'Name: Alice' not found in memory block 'human'" in message
    assert await value(client, agent["id"], "human") == "Name: Bob"
    assert await agent_changes(db) == []


# --------------------------------------------------------------------------- memory_replace


async def test_memory_replace_replaces_the_unique_occurrence(client, llm):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob\nCity: Paris"}])

    ok(
        await call(
            client,
            llm,
            agent["id"],
            "memory_replace",
            {"label": "human", "old_string": "City: Paris", "new_string": "City: Rome"},
        )
    )

    assert await value(client, agent["id"], "human") == "Name: Bob\nCity: Rome"
    assert "City: Rome" in await compiled_prompt(client, agent["id"])


async def test_memory_replace_without_a_match_is_an_error(client, llm):
    agent = await make_agent(client)

    message = failed(
        await call(client, llm, agent["id"], "memory_replace", {"label": "human", "old_string": "Name: Alice", "new_string": "x"})
    )

    assert "did not appear verbatim" in message and "`human`" in message
    assert await value(client, agent["id"], "human") == "Name: Bob"


async def test_memory_replace_with_two_matches_names_their_lines(client, llm):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Likes: tea\nAge: 40\nLikes: tea"}])

    message = failed(
        await call(
            client,
            llm,
            agent["id"],
            "memory_replace",
            {"label": "human", "old_string": "Likes: tea", "new_string": "Likes: coffee"},
        )
    )

    assert "Multiple occurrences" in message and "lines [1, 3]" in message
    assert await value(client, agent["id"], "human") == "Likes: tea\nAge: 40\nLikes: tea"


# --------------------------------------------------------------------------- memory_insert


async def test_memory_insert_at_line_zero_goes_on_top(client, llm):
    agent = await make_agent(client)

    ok(await call(client, llm, agent["id"], "memory_insert", {"label": "human", "new_string": "VIP", "insert_line": 0}))

    assert await value(client, agent["id"], "human") == "VIP\nName: Bob"


async def test_memory_insert_without_a_line_appends_at_the_end(client, llm):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob\nAge: 40"}])

    ok(await call(client, llm, agent["id"], "memory_insert", {"label": "human", "new_string": "City: Rome"}))

    assert await value(client, agent["id"], "human") == "Name: Bob\nAge: 40\nCity: Rome"


async def test_memory_insert_out_of_range_is_an_error(client, llm):
    agent = await make_agent(client)

    message = failed(
        await call(client, llm, agent["id"], "memory_insert", {"label": "human", "new_string": "x", "insert_line": 5})
    )

    assert "Invalid `insert_line` parameter: 5" in message and "[0, 1]" in message
    assert await value(client, agent["id"], "human") == "Name: Bob"


# --------------------------------------------------------------------------- memory_rethink / finish_edits


async def test_memory_rethink_rewrites_the_whole_block(client, llm, db):
    agent = await make_agent(client)

    ok(
        await call(
            client, llm, agent["id"], "memory_rethink", {"label": "human", "new_memory": "Robert (Bob), 40\nLives in Rome"}
        )
    )

    assert await value(client, agent["id"], "human") == "Robert (Bob), 40\nLives in Rome"
    prompt = await compiled_prompt(client, agent["id"])
    assert "Lives in Rome" in prompt and "Name: Bob" not in prompt
    [change] = await agent_changes(db)
    assert change["value"] == "Robert (Bob), 40\nLives in Rome" and change["step_id"].startswith("step-")


async def test_memory_finish_edits_ends_a_sleeptime_turn_after_one_step(client, llm):
    agent = await create_agent(client, **MODEL, agent_type="sleeptime_agent")
    llm.reply(tool_calls=[("memory_finish_edits", {})])

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "end_turn"
    assert body["usage"]["step_count"] == 1 and len(llm.requests) == 1
    [returned] = returns_of(body)
    assert ok(returned) == "Memory edits finished."


async def test_sleeptime_agent_edits_then_finishes(client, llm):
    agent = await create_agent(client, **MODEL, agent_type="sleeptime_agent")
    llm.reply(tool_calls=[("memory_rethink", {"label": "human", "new_memory": "Name: Robert", "request_heartbeat": True})])
    llm.reply(tool_calls=[("memory_finish_edits", {})])

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "end_turn" and body["usage"]["step_count"] == 2
    assert [r["status"] for r in returns_of(body)] == ["success", "success"]
    assert await value(client, agent["id"], "human") == "Name: Robert"


# --------------------------------------------------------------------------- memory_apply_patch


async def test_apply_patch_single_block(client, llm):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob\nCity: Paris\nAge: 40"}])
    patch = "@@\n Name: Bob\n-City: Paris\n+City: Rome\n+Job: chef\n"

    ok(await call(client, llm, agent["id"], "memory_apply_patch", {"label": "human", "patch": patch}))

    assert await value(client, agent["id"], "human") == "Name: Bob\nCity: Rome\nJob: chef\nAge: 40"
    assert "Job: chef" in await compiled_prompt(client, agent["id"])


async def test_apply_patch_single_block_with_unmatched_context_is_an_error(client, llm):
    agent = await make_agent(client)

    message = failed(
        await call(client, llm, agent["id"], "memory_apply_patch", {"label": "human", "patch": "@@\n-Name: Alice\n+Name: Eve"})
    )

    assert "expected hunk context not found" in message
    assert await value(client, agent["id"], "human") == "Name: Bob"


async def test_apply_patch_add_block_creates_and_attaches_it(client, llm, db):
    agent = await make_agent(client)
    before = await block_rows(db)
    patch = "*** Begin Patch\n*** Add Block: projects\nDescription: What Bob works on\n+memvm\n+letta\n*** End Patch"

    message = ok(await call(client, llm, agent["id"], "memory_apply_patch", {"patch": patch}))

    assert "added 'projects'" in message
    assert await block_rows(db) == before + 1
    projects = (await blocks_of(client, agent["id"]))["projects"]
    assert projects["value"] == "memvm\nletta" and projects["description"] == "What Bob works on"
    assert "<projects>" in await compiled_prompt(client, agent["id"])
    assert [(c["change"], c["label"]) for c in await agent_changes(db)] == [("create", "projects")]


async def test_apply_patch_update_and_move(client, llm):
    agent = await make_agent(client)
    patch = "*** Update Block: human\n@@\n-Name: Bob\n+Name: Robert\n*** Move to: user\n"

    message = ok(await call(client, llm, agent["id"], "memory_apply_patch", {"patch": patch}))

    assert "updated 'human'" in message and "moved 'human' to 'user'" in message
    blocks = await blocks_of(client, agent["id"])
    assert "human" not in blocks and blocks["user"]["value"] == "Name: Robert"
    assert (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/user")).status_code == 200
    assert (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).status_code == 404
    prompt = await compiled_prompt(client, agent["id"])
    assert "<user>" in prompt and "<human>" not in prompt


async def test_apply_patch_delete_block(client, llm, db):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob"}, {"label": "scratch", "value": "tmp"}])
    before = await block_rows(db)

    ok(await call(client, llm, agent["id"], "memory_apply_patch", {"patch": "*** Delete Block: scratch"}))

    assert "scratch" not in await blocks_of(client, agent["id"])
    assert await block_rows(db) == before - 1
    assert "<scratch>" not in await compiled_prompt(client, agent["id"])


async def test_multi_block_patch_failing_late_applies_nothing(client, llm, db):
    agent = await make_agent(
        client,
        blocks=[
            {"label": "human", "value": "Name: Bob"},
            {"label": "persona", "value": "I am Sam."},
            {"label": "scratch", "value": "tmp"},
        ],
    )
    before_rows = await block_rows(db)
    before_prompt, compiled_at = await db.fetchrow(
        "SELECT compiled_system, system_compiled_at FROM agent WHERE id = $1", agent["id"]
    )
    patch = (
        "*** Add Block: projects\n+memvm\n"
        "*** Update Block: human\n@@\n-Name: Bob\n+Name: Robert\n"
        "*** Delete Block: scratch\n"
        "*** Update Block: persona\n@@\n-I am Nobody.\n+I am Someone.\n"
    )

    message = failed(await call(client, llm, agent["id"], "memory_apply_patch", {"patch": patch}))

    assert "expected hunk context not found" in message and "persona" in message
    blocks = await blocks_of(client, agent["id"])
    assert sorted(blocks) == ["human", "persona", "scratch"]
    assert blocks["human"]["value"] == "Name: Bob" and blocks["scratch"]["value"] == "tmp"
    assert await block_rows(db) == before_rows
    assert await agent_changes(db) == []
    stored_prompt, stored_at = await db.fetchrow(
        "SELECT compiled_system, system_compiled_at FROM agent WHERE id = $1", agent["id"]
    )
    assert stored_prompt == before_prompt and "<projects>" not in stored_prompt
    assert stored_at == compiled_at  # not even recompiled: the failed call's recompile went with its writes


async def test_multi_block_patch_whose_move_clashes_applies_nothing(client, llm, db):
    agent = await make_agent(client)
    patch = "*** Update Block: human\n@@\n-Name: Bob\n+Name: Robert\n*** Move to: persona\n"

    message = failed(await call(client, llm, agent["id"], "memory_apply_patch", {"patch": patch}))

    assert "persona" in message
    blocks = await blocks_of(client, agent["id"])
    assert blocks["human"]["value"] == "Name: Bob" and blocks["persona"]["value"] == "I am Sam."
    assert await agent_changes(db) == []


# --------------------------------------------------------------------------- the `memory` omni-tool


async def test_memory_view_of_a_block_is_line_numbered(client, llm):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob\nAge: 40"}])

    message = ok(await call(client, llm, agent["id"], "memory", {"command": "view", "path": "/memories/human"}))

    assert message == "Memory block 'human' (2 lines):\n1→ Name: Bob\n2→ Age: 40"


async def test_memory_view_of_the_root_lists_the_blocks(client, llm):
    agent = await make_agent(
        client,
        blocks=[
            {"label": "human", "value": "Name: Bob"},
            {"label": "notes", "value": "", "limit": 500, "description": "Scratch"},
        ],
    )

    message = ok(await call(client, llm, agent["id"], "memory", {"command": "view", "path": "/memories"}))

    lines = message.split("\n")
    assert lines[0] == "Memory blocks:"
    assert lines[1].startswith("- /memories/human (9/100000 chars): What you know")
    assert lines[2] == "- /memories/notes (0/500 chars): Scratch"


async def test_memory_create_attaches_a_block_seen_from_the_next_turn(client, llm, db):
    agent = await make_agent(client)
    before = await block_rows(db)
    llm.reply(
        tool_calls=[
            ("memory", {"command": "create", "path": "/memories/projects", "description": "Bob's projects", "file_text": "memvm"})
        ]
    )
    llm.reply("Created.").reply("Next turn.")

    first = await send(client, agent["id"])
    await send(client, agent["id"])

    assert "Created memory block 'projects'" in ok(returns_of(first)[0])
    assert await block_rows(db) == before + 1
    assert (await blocks_of(client, agent["id"]))["projects"]["value"] == "memvm"
    same_turn, next_turn = llm.requests[1]["messages"][0]["content"], llm.requests[2]["messages"][0]["content"]
    assert "<projects>" not in same_turn
    assert "<projects>" in next_turn and "Bob's projects" in next_turn and "memvm" in next_turn


async def test_memory_create_of_an_existing_label_is_an_error(client, llm, db):
    agent = await make_agent(client)
    before = await block_rows(db)

    message = failed(
        await call(
            client,
            llm,
            agent["id"],
            "memory",
            {"command": "create", "path": "/memories/human", "description": "dup", "file_text": "x"},
        )
    )

    assert "already exists" in message
    assert await block_rows(db) == before
    assert await value(client, agent["id"], "human") == "Name: Bob"


async def test_memory_str_replace(client, llm):
    agent = await make_agent(client)

    ok(
        await call(
            client,
            llm,
            agent["id"],
            "memory",
            {"command": "str_replace", "path": "/memories/human", "old_string": "Bob", "new_string": "Robert"},
        )
    )

    assert await value(client, agent["id"], "human") == "Name: Robert"
    assert "Name: Robert" in await compiled_prompt(client, agent["id"])


async def test_memory_insert_without_a_line_appends(client, llm):
    agent = await make_agent(client)

    ok(await call(client, llm, agent["id"], "memory", {"command": "insert", "path": "/memories/human", "insert_text": "Age: 40"}))

    assert await value(client, agent["id"], "human") == "Name: Bob\nAge: 40"


async def test_memory_delete_detaches_and_deletes_an_unshared_block(client, llm, db):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob"}, {"label": "scratch", "value": "tmp"}])
    before = await block_rows(db)

    message = ok(await call(client, llm, agent["id"], "memory", {"command": "delete", "path": "/memories/scratch"}))

    assert message == "Deleted memory block 'scratch'."
    assert "scratch" not in await blocks_of(client, agent["id"])
    assert await block_rows(db) == before - 1
    assert [(c["change"], c["label"]) for c in await agent_changes(db)] == [("delete", "scratch")]
    assert "<scratch>" not in await compiled_prompt(client, agent["id"])


async def test_memory_delete_keeps_a_block_another_agent_shares(client, llm, db):
    shared = await create_block(client, label="team", value="We ship on Fridays")
    agent = await make_agent(client, block_ids=[shared["id"]])
    other = await make_agent(client, block_ids=[shared["id"]])

    ok(await call(client, llm, agent["id"], "memory", {"command": "delete", "path": "/memories/team"}))

    assert "team" not in await blocks_of(client, agent["id"])
    assert (await blocks_of(client, other["id"]))["team"]["value"] == "We ship on Fridays"
    assert await db.fetchval("SELECT count(*) FROM block WHERE id = $1", shared["id"]) == 1
    assert "<team>" in await compiled_prompt(client, other["id"])


async def test_memory_rename_relabels_the_block(client, llm):
    agent = await make_agent(client)

    message = ok(
        await call(
            client,
            llm,
            agent["id"],
            "memory",
            {"command": "rename", "old_path": "/memories/human", "new_path": "/memories/user/profile"},
        )
    )

    assert message == "Renamed memory block 'human' to 'user/profile'."
    renamed = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/user/profile")
    assert renamed.status_code == 200 and renamed.json()["value"] == "Name: Bob"
    assert (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).status_code == 404
    prompt = await compiled_prompt(client, agent["id"])
    assert "<user/profile>" in prompt and "<human>" not in prompt


async def test_memory_rename_changes_the_description(client, llm):
    agent = await make_agent(client)

    ok(
        await call(
            client,
            llm,
            agent["id"],
            "memory",
            {"command": "rename", "path": "/memories/human", "description": "Facts about Bob only"},
        )
    )

    assert (await blocks_of(client, agent["id"]))["human"]["description"] == "Facts about Bob only"
    assert "Facts about Bob only" in await compiled_prompt(client, agent["id"])


async def test_memory_unknown_command_is_an_error(client, llm):
    agent = await make_agent(client)

    message = failed(await call(client, llm, agent["id"], "memory", {"command": "copy", "path": "/memories/human"}))

    assert "Unknown command 'copy'" in message and "str_replace" in message


# --------------------------------------------------------------------------- guards against line numbers


NUMBERED_CALLS = [
    ("memory_replace", {"label": "human", "old_string": "1→ Name: Bob", "new_string": "Name: Rob"}),
    ("memory_replace", {"label": "human", "old_string": "Name: Bob", "new_string": "1→ Name: Rob"}),
    ("memory_insert", {"label": "human", "new_string": "2→ Age: 40"}),
    ("memory_rethink", {"label": "human", "new_memory": "1→ Name: Rob"}),
    ("core_memory_append", {"label": "human", "content": "2→ Age: 40"}),
    ("core_memory_replace", {"label": "human", "old_content": "1→ Name: Bob", "new_content": "Name: Rob"}),
    ("memory_apply_patch", {"label": "human", "patch": "@@\n-1→ Name: Bob\n+1→ Name: Rob"}),
    ("memory", {"command": "str_replace", "path": "/memories/human", "old_string": "1→ Name: Bob", "new_string": "x"}),
    ("memory", {"command": "insert", "path": "/memories/human", "insert_text": "2→ Age: 40"}),
]


@pytest.mark.parametrize(("tool", "args"), NUMBERED_CALLS, ids=lambda v: v if isinstance(v, str) else "")
async def test_line_number_prefixes_are_refused(client, llm, tool, args):
    agent = await make_agent(client)

    message = failed(await call(client, llm, agent["id"], tool, args))

    assert LINE_NUMBER_ERROR in message
    assert await value(client, agent["id"], "human") == "Name: Bob"


async def test_memory_create_with_numbered_file_text_is_refused(client, llm, db):
    agent = await make_agent(client)
    before = await block_rows(db)

    message = failed(
        await call(
            client,
            llm,
            agent["id"],
            "memory",
            {"command": "create", "path": "/memories/notes", "description": "d", "file_text": "1→ a"},
        )
    )

    assert LINE_NUMBER_ERROR in message and await block_rows(db) == before


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("memory_rethink", {"label": "human", "new_memory": f"{BANNER}\nName: Rob"}),
        ("memory_replace", {"label": "human", "old_string": "Name: Bob", "new_string": f"{BANNER}\nName: Rob"}),
        ("core_memory_append", {"label": "human", "content": BANNER}),
    ],
)
async def test_the_line_number_banner_is_refused(client, llm, tool, args):
    agent = await make_agent(client)

    message = failed(await call(client, llm, agent["id"], tool, args))

    assert "warning banner" in message
    assert await value(client, agent["id"], "human") == "Name: Bob"


# --------------------------------------------------------------------------- read-only blocks


READ_ONLY_EDITS = [
    ("core_memory_append", {"label": "policy", "content": "be rude"}),
    ("core_memory_replace", {"label": "policy", "old_content": "kind", "new_content": "rude"}),
    ("memory_replace", {"label": "policy", "old_string": "kind", "new_string": "rude"}),
    ("memory_insert", {"label": "policy", "new_string": "be rude", "insert_line": 0}),
    ("memory_rethink", {"label": "policy", "new_memory": "be rude"}),
    ("memory_apply_patch", {"label": "policy", "patch": "@@\n-be kind\n+be rude"}),
    ("memory_apply_patch", {"patch": "*** Update Block: policy\n@@\n-be kind\n+be rude"}),
    ("memory_apply_patch", {"patch": "*** Delete Block: policy"}),
    ("memory_apply_patch", {"patch": "*** Update Block: policy\n*** Move to: rules"}),
    ("memory", {"command": "str_replace", "path": "/memories/policy", "old_string": "kind", "new_string": "rude"}),
    ("memory", {"command": "insert", "path": "/memories/policy", "insert_text": "be rude"}),
    ("memory", {"command": "delete", "path": "/memories/policy"}),
    ("memory", {"command": "rename", "old_path": "/memories/policy", "new_path": "/memories/rules"}),
    ("memory", {"command": "rename", "path": "/memories/policy", "description": "anything goes"}),
]


@pytest.mark.parametrize(("tool", "args"), READ_ONLY_EDITS, ids=lambda v: v if isinstance(v, str) else "")
async def test_every_edit_of_a_read_only_block_is_refused(client, llm, db, tool, args):
    agent = await make_agent(
        client, blocks=[{"label": "policy", "value": "be kind", "read_only": True, "description": "House rules"}]
    )

    message = failed(await call(client, llm, agent["id"], tool, args))

    assert "read-only" in message
    policy = (await blocks_of(client, agent["id"]))["policy"]
    assert (policy["value"], policy["description"], policy["version"]) == ("be kind", "House rules", 1)
    assert await agent_changes(db) == []


async def test_memory_view_of_a_read_only_block_works(client, llm):
    agent = await make_agent(client, blocks=[{"label": "policy", "value": "be kind", "read_only": True}])

    message = ok(await call(client, llm, agent["id"], "memory", {"command": "view", "path": "/memories/policy"}))

    assert message == "Memory block 'policy' (1 line):\n1→ be kind"


# --------------------------------------------------------------------------- concurrent REST edits


async def test_tool_edit_applies_to_the_value_a_rest_edit_left_between_turns(client, llm):
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob\nCity: Paris"}])
    llm.reply("first turn")
    await send(client, agent["id"])
    patched = await client.patch(
        f"/v1/agents/{agent['id']}/core-memory/blocks/human", json={"value": "Name: Bob Smith\nCity: Berlin"}
    )
    assert patched.status_code == 200, patched.text

    replaced = await call(
        client,
        llm,
        agent["id"],
        "memory_replace",
        {"label": "human", "old_string": "Name: Bob Smith", "new_string": "Name: Robert Smith"},
    )
    stale = await call(
        client, llm, agent["id"], "memory_replace", {"label": "human", "old_string": "City: Paris", "new_string": "City: Rome"}
    )

    ok(replaced)
    assert "City: Paris" in failed(stale) and "did not appear verbatim" in failed(stale)
    assert await value(client, agent["id"], "human") == "Name: Robert Smith\nCity: Berlin"


async def test_tool_edit_rereads_a_block_changed_over_rest_during_the_model_call(client, llm):
    """The model saw 'City: Paris' in its prompt, but REST changed it while the model was thinking:
    the edit is computed on the new value under the row lock, never on the turn's stale snapshot."""
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob\nCity: Paris"}])
    llm.reply(
        tool_calls=[
            ("memory_replace", {"label": "human", "old_string": "Name: Bob Smith", "new_string": "Name: Rob"}),
            ("memory_replace", {"label": "human", "old_string": "City: Paris", "new_string": "City: Rome"}),
        ],
        delay=1.0,
    )
    llm.reply("done")

    turn = asyncio.create_task(send(client, agent["id"]))
    while not llm.requests:
        await asyncio.sleep(0.01)
    patched = await client.patch(
        f"/v1/agents/{agent['id']}/core-memory/blocks/human", json={"value": "Name: Bob Smith\nCity: Berlin"}
    )
    body = await turn

    assert patched.status_code == 200, patched.text
    assert "City: Paris" in llm.requests[0]["messages"][0]["content"]
    first, second = returns_of(body)
    ok(first)
    assert "did not appear verbatim" in failed(second)
    assert await value(client, agent["id"], "human") == "Name: Rob\nCity: Berlin"


async def test_tool_edit_waits_for_the_row_lock_and_reads_the_committed_value(client, llm, db):
    """Another writer holds the block's row lock when the tool runs: the tool waits for it and
    computes its edit on the value that writer committed."""
    agent = await make_agent(client, blocks=[{"label": "human", "value": "Name: Bob\nCity: Paris"}])
    block_id = (await blocks_of(client, agent["id"]))["human"]["id"]
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "City: Berlin", "new_string": "City: Rome"})])
    llm.reply("done")

    writer = db.transaction()
    await writer.start()
    await db.execute("SELECT 1 FROM block WHERE id = $1 FOR UPDATE", block_id)
    turn = asyncio.create_task(send(client, agent["id"]))
    for _ in range(500):  # until the tool's SELECT ... FOR UPDATE is queued behind our lock
        if await db.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted") > 0:
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail("the tool never waited for the block's row lock")
    await db.execute("UPDATE block SET value = 'Name: Bob\nCity: Berlin', version = version + 1 WHERE id = $1", block_id)
    await writer.commit()
    body = await turn

    ok(returns_of(body)[0])
    assert await value(client, agent["id"], "human") == "Name: Bob\nCity: Rome"


# --------------------------------------------------------------------------- what the model reads back


async def test_the_model_reads_tool_results_as_compact_json(client, llm):
    agent = await make_agent(client)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Age: 40"})])
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Name: Alice", "new_string": "x"})])
    llm.reply("done")

    body = await send(client, agent["id"])

    good, bad = sent_tool_result(llm, 1), sent_tool_result(llm, 2)
    assert set(good) == {"status", "message"} and set(bad) == {"status", "message"}
    success, error = returns_of(body)
    assert good == {"status": "OK", "message": success["tool_return"]}
    assert bad == {"status": "Failed", "message": error["tool_return"]}
    assert "did not appear verbatim" in bad["message"]


BIG_BLOCK_EDITS = [
    ("memory_replace", {"label": "big", "old_string": "fact 050 ", "new_string": "FACT 050 "}),
    ("memory_insert", {"label": "big", "new_string": "a new fact", "insert_line": 50}),
    ("core_memory_append", {"label": "big", "content": "a new fact"}),
    ("core_memory_replace", {"label": "big", "old_content": "fact 050 ", "new_content": "FACT 050 "}),
    ("memory_apply_patch", {"label": "big", "patch": "@@\n+a new fact"}),
    ("memory", {"command": "str_replace", "path": "/memories/big", "old_string": "fact 050 ", "new_string": "FACT 050 "}),
    ("memory", {"command": "insert", "path": "/memories/big", "insert_text": "a new fact", "insert_line": 0}),
]


@pytest.mark.parametrize(("tool", "args"), BIG_BLOCK_EDITS, ids=lambda v: v if isinstance(v, str) else "")
async def test_edit_results_are_a_short_confirmation_with_a_diff(client, llm, tool, args):
    big = "\n".join(f"fact {n:03d} " + "x" * 40 for n in range(100))  # 100 lines of 49 chars
    assert len(big) > 4_900
    agent = await make_agent(client, blocks=[{"label": "big", "value": big}])

    message = ok(await call(client, llm, agent["id"], tool, args))

    assert len(message) < 1_000
    assert message.startswith("Memory block 'big' updated (")
    assert "+++ big (after)" in message and ("\n+a new fact" in message or "\n+FACT 050 " in message)
    assert await value(client, agent["id"], "big") != big
