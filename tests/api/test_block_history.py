"""Block history as a feature: newest-first pages of what changed and who changed it, the value at a
version, undo and redo that walk the history as an editor does, restore, and retention."""

from datetime import UTC, datetime, timedelta

from memvm.blocks.retention import prune_once
from memvm.config import Settings
from tests.support.api import compiled_prompt, create_agent, create_block

MODEL = {"model": "openai/scripted-model"}


async def write(client, block_id: str, **fields) -> dict:
    response = await client.patch(f"/v1/blocks/{block_id}", json=fields)
    assert response.status_code == 200, response.text
    return response.json()


async def history(client, block_id: str, **params) -> list[dict]:
    response = await client.get(f"/v1/blocks/{block_id}/history", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def step(client, block_id: str, action: str, **headers) -> dict:
    response = await client.post(f"/v1/blocks/{block_id}/{action}", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def test_history_is_newest_first_with_what_changed_and_who(client):
    block = await create_block(client, label="notes", value="one\n")
    await write(client, block["id"], value="one\ntwo\n")
    await write(client, block["id"], description="Working notes", limit=500)

    entries = await history(client, block["id"])
    page = await history(client, block["id"], limit=1, before=3)
    diffed = await history(client, block["id"], format="diff", limit=2)
    newer = await history(client, block["id"], after=1)
    past_the_end = await history(client, block["id"], before=1)

    assert [(e["version"], e["change"]) for e in entries] == [(3, "update"), (2, "update"), (1, "create")]
    assert entries[0]["changed_fields"] == ["limit", "description"]
    assert entries[0]["old"]["limit"] != 500 and entries[0]["new"] == {"limit": 500, "description": "Working notes"}
    assert entries[1]["old"] == {"value": "one\n"} and entries[1]["new"] == {"value": "one\ntwo\n"}
    assert entries[2]["old"] is None and entries[2]["new"]["value"] == "one\n"
    assert entries[0]["actor"]["type"] == "local" and entries[0]["actor"]["organization_id"].startswith("org-")
    assert [e["version"] for e in page] == [2] and [e["version"] for e in newer] == [3, 2] and past_the_end == []
    assert "+two" in diffed[1]["diff"] and "value" not in diffed[1]["new"] and diffed[0]["diff"] == ""


async def test_an_agent_s_edit_names_its_run_step_and_tool_call(client, llm):
    agent = await create_agent(client, **MODEL, memory_blocks=[{"label": "human", "value": "Ana"}])
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})]).reply("Noted.")
    turn = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "I like tea"})).json()
    call = next(m for m in turn["messages"] if m["message_type"] == "tool_call_message")

    [newest, *_] = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human/history")).json()

    assert newest["actor"] | {"organization_id": None} == {
        "type": "agent",
        "id": agent["id"],
        "organization_id": None,
        "run_id": call["run_id"],
        "step_id": call["step_id"],
        "tool_call_id": call["tool_call"]["tool_call_id"],
    }
    assert "Likes tea" in newest["new"]["value"]


async def test_undo_and_redo_walk_the_history_as_an_editor_does(client):
    agent = await create_agent(client, memory_blocks=[{"label": "draft", "value": "a"}])
    block_id = agent["blocks"][0]["id"]
    for value in ("b", "c"):
        await write(client, block_id, value=value)

    values = []
    for action in ("undo", "undo", "redo"):
        values.append((await step(client, block_id, action))["value"])
    await write(client, block_id, value="d")  # a new edit drops what could be redone
    no_redo = await client.post(f"/v1/blocks/{block_id}/redo")
    after_edit = (await step(client, block_id, "undo"))["value"]

    assert values == ["b", "a", "b"]
    assert no_redo.status_code == 400 and "nothing to redo" in no_redo.json()["detail"]
    assert after_edit == "b" and "<value>\nb\n</value>" in await compiled_prompt(client, agent["id"])
    entries = await history(client, block_id)
    assert [(e["change"], e["restored_version"]) for e in entries[:2]] == [("undo", 2), ("update", None)]
    assert [e["version"] for e in entries] == list(range(8, 0, -1))  # no gaps: every step is a version


async def test_undo_obeys_if_match_and_today_s_limit_and_changes_nothing_when_refused(client):
    block = await create_block(client, label="bio", value="x" * 50, limit=100)
    await write(client, block["id"], value="short")
    await write(client, block["id"], limit=10)

    stale = await client.post(f"/v1/blocks/{block['id']}/undo", headers={"If-Match": '"2"'})
    too_long = await client.post(f"/v1/blocks/{block['id']}/restore", json={"version": 1})
    unknown = await client.post(f"/v1/blocks/{block['id']}/restore", json={"version": 99})
    current = (await client.get(f"/v1/blocks/{block['id']}")).json()
    fresh = await client.post(f"/v1/blocks/{block['id']}/undo", headers={"If-Match": '"3"'})

    assert stale.status_code == 412 and too_long.status_code == 422 and unknown.status_code == 404
    assert "50 characters, over its limit of 10" in too_long.json()["detail"]
    assert (current["version"], current["value"], current["limit"]) == (3, "short", 10)
    assert fresh.status_code == 200 and fresh.headers["etag"] == '"4"'  # the limit-only edit undone: same content


async def test_versions_and_a_deleted_block_s_history_stay_readable(client):
    block = await create_block(client, label="gone", value="first")
    await write(client, block["id"], value="second")
    assert (await client.delete(f"/v1/blocks/{block['id']}")).status_code == 200

    first = (await client.get(f"/v1/blocks/{block['id']}/versions/1")).json()
    missing = await client.get(f"/v1/blocks/{block['id']}/versions/7")
    entries = await history(client, block["id"])
    unknown = await client.get("/v1/blocks/block-00000000-0000-4000-8000-000000000000/history")

    assert first["value"] == "first" and first["change"] == "create" and missing.status_code == 404
    assert entries[0]["change"] == "delete" and entries[0]["new"]["value"] == "second"
    assert (await client.get(f"/v1/blocks/{block['id']}")).status_code == 404 and unknown.status_code == 404


async def test_each_block_numbers_its_own_changes_from_one_deletion_included(client, db):
    """No counter is shared between blocks: a change takes its block's next number."""
    first, second = await create_block(client, label="one", value="a"), await create_block(client, label="two", value="a")
    for value in ("b", "c"):
        await write(client, first["id"], value=value)
        await write(client, second["id"], value=value)
    assert (await client.delete(f"/v1/blocks/{first['id']}")).status_code == 200
    rows = await db.fetch(
        "SELECT block_id, id, version, change FROM block_change WHERE block_id = any($1::text[]) ORDER BY block_id, id",
        [first["id"], second["id"]],
    )

    numbered = {
        block["id"]: [(r["id"], r["version"], r["change"]) for r in rows if r["block_id"] == block["id"]]
        for block in (first, second)
    }
    assert numbered[first["id"]] == [(1, 1, "create"), (2, 2, "update"), (3, 3, "update"), (4, 3, "delete")]
    assert numbered[second["id"]] == [(1, 1, "create"), (2, 2, "update"), (3, 3, "update")]


async def test_retention_keeps_the_newest_versions_or_days_and_each_current_state(client, sessionmaker, db):
    kept, aged = await create_block(client, label="kept", value="0"), await create_block(client, label="aged", value="0")
    for number in range(1, 5):
        await write(client, kept["id"], value=str(number))
        await write(client, aged["id"], value=str(number))
    long_ago = datetime.now(UTC) - timedelta(days=40)
    await db.execute("UPDATE block_change SET created_at = $1 WHERE block_id = $2", long_ago, aged["id"])

    by_count = await prune_once(sessionmaker, Settings(block_history_keep_versions=3))
    by_age = await prune_once(sessionmaker, Settings(block_history_keep_days=30))

    assert by_count == 4 and by_age == 2
    assert [e["version"] for e in await history(client, kept["id"])] == [5, 4, 3]
    assert [e["version"] for e in await history(client, aged["id"])] == [5]
    assert (await client.get(f"/v1/blocks/{aged['id']}")).json()["value"] == "4"


async def test_versions_past_any_a_block_can_have_are_a_422_and_a_page_past_the_newest_is_empty(client):
    """Found by Schemathesis (tests/fuzz/): both were 500s."""
    block = await create_block(client, label="notes", value="one")
    too_big = 2**31  # versions are 32-bit integers

    restore = await client.post(f"/v1/blocks/{block['id']}/restore", json={"version": too_big})
    version = await client.get(f"/v1/blocks/{block['id']}/versions/{too_big}")
    bounded = await client.get(f"/v1/blocks/{block['id']}/history", params={"before": too_big})

    for response in (restore, version, bounded):
        assert response.status_code == 422, response.text
        assert "less than or equal to 2147483647" in response.json()["detail"]
    assert await history(client, block["id"], after=2**31 - 1) == []
    by_label = await client.get(f"/v1/agents/{(await create_agent(client))['id']}/core-memory/blocks/human/history?after=5")
    assert by_label.status_code == 200 and by_label.json() == []
