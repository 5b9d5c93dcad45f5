"""What a turn stores, row by row: the run it starts fails the conversation's runs a dead process left
`running` (in the statement that creates it), and each step's row goes in with its messages (in one
statement) with what a flush of the ORM objects stored: the order, the timestamps, the links."""

import asyncio
import json

from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}
DEAD = "run-00000000-0000-4000-8000-0000000000{}"


async def left_running(db, agent_id: str, conversation_id: str | None, suffix: str) -> str:
    """A run its process died in the middle of."""
    run_id = DEAD.format(suffix)
    await db.execute(
        "INSERT INTO run (id, agent_id, conversation_id, status, organization_id)"
        " SELECT $1, id, $2, 'running', organization_id FROM agent WHERE id = $3",
        run_id,
        conversation_id,
        agent_id,
    )
    return run_id


async def statuses(db) -> dict[str, str]:
    return {row["id"]: row["status"] for row in await db.fetch("SELECT id, status FROM run WHERE id LIKE 'run-00000000%'")}


async def test_a_turn_fails_only_its_own_conversations_orphaned_runs_whether_it_starts_or_was_queued(client, llm, db):
    agent = await create_agent(client, **MODEL)
    one, other = [(await client.post("/v1/conversations/", params={"agent_id": agent["id"]})).json()["id"] for _ in "ab"]
    in_one = await left_running(db, agent["id"], one, "a1")
    in_other = await left_running(db, agent["id"], other, "b1")
    in_default = await left_running(db, agent["id"], None, "c1")
    llm.reply("Hello.").reply("Hello again.")

    sent = await client.post(f"/v1/conversations/{one}/messages", json={"input": "hi", "streaming": False})
    after_turn = await statuses(db)
    queued = (await client.post(f"/v1/agents/{agent['id']}/messages/async", json={"input": "hi"})).json()
    for _ in range(400):  # the background run starts from its stored `created` row
        if (await client.get(f"/v1/runs/{queued['id']}")).json()["status"] == "completed":
            break
        await asyncio.sleep(0.025)
    after_background = await statuses(db)
    failed = await db.fetch("SELECT stop_reason, completed_at FROM run WHERE id = ANY($1)", [in_one, in_default])

    assert sent.status_code == 200, sent.text
    assert after_turn == {in_one: "failed", in_other: "running", in_default: "running"}
    assert after_background == {in_one: "failed", in_other: "running", in_default: "failed"}
    assert [(row["stop_reason"], row["completed_at"] is not None) for row in failed] == [("error", True)] * 2


async def test_a_turn_in_the_default_conversation_fails_only_the_default_conversations_orphans(client, llm, db):
    agent = await create_agent(client, **MODEL)
    conversation = (await client.post("/v1/conversations/", params={"agent_id": agent["id"]})).json()["id"]
    in_conversation = await left_running(db, agent["id"], conversation, "d1")
    in_default = await left_running(db, agent["id"], None, "e1")
    llm.reply("Hello.")

    sent = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi", "streaming": False})
    [own] = await db.fetch("SELECT * FROM run WHERE agent_id = $1 AND id NOT LIKE 'run-00000000%'", agent["id"])

    assert sent.status_code == 200, sent.text
    assert await statuses(db) == {in_conversation: "running", in_default: "failed"}
    assert (own["status"], own["stop_reason"], own["conversation_id"], own["background"]) == (
        "completed",
        "end_turn",
        None,
        False,
    )
    assert own["created_at"] <= own["completed_at"] and own["ttft_ns"] > 0 and json.loads(own["usage"])["total_tokens"] > 0


async def test_a_turns_message_and_step_rows_are_what_a_flush_of_its_objects_stored(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Bob", "new_string": "Robert"})])
    llm.reply("Noted, Robert.")

    sent = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "Call me Robert"})
    body = sent.json()
    run_id = body["usage"]["run_ids"][0]
    organization = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
    rows = await db.fetch("SELECT * FROM message WHERE run_id = $1 ORDER BY seq", run_id)
    steps = await db.fetch("SELECT * FROM step WHERE run_id = $1 ORDER BY created_at", run_id)

    assert sent.status_code == 200, sent.text
    assert [(m["role"], m["kind"]) for m in rows] == [
        ("user", "message"),
        ("assistant", "message"),
        ("tool", "message"),
        ("assistant", "message"),
    ]
    assert [m["created_at"] for m in rows] == sorted(m["created_at"] for m in rows)
    assert len({m["created_at"] for m in rows}) == len(rows)  # each row stamped as it was stored
    assert [m["step_id"] for m in rows] == [steps[0]["id"]] * 3 + [steps[1]["id"]]
    assert {m["organization_id"] for m in rows} == {s["organization_id"] for s in steps} == {organization}
    assert [(m["in_context"], m["conversation_id"]) for m in rows] == [(True, None)] * 4  # (the embedding worker may be at them)
    user, call, result, answer = rows
    assert (user["content"], answer["content"], answer["tool_calls"]) == ("Call me Robert", "Noted, Robert.", None)
    [made] = json.loads(call["tool_calls"])
    assert (made["name"], json.loads(made["arguments"])["new_string"]) == ("memory_replace", "Robert")
    assert (result["tool_call_id"], result["tool_name"], result["tool_status"]) == (made["id"], "memory_replace", "success")
    assert [(json.loads(s["tool_calls"]), s["stop_reason"], s["status"]) for s in steps] == [
        (["memory_replace"], None, "success"),
        ([], "end_turn", "success"),
    ]
    assert all(json.loads(s["tags"]) == [] and s["prompt_tokens"] > 0 for s in steps)
    # What the client was shown comes from the objects: they carry what the database filled in.
    shown = {m["id"]: m["date"] for m in body["messages"]}
    assert shown == {m["id"]: m["created_at"].isoformat(timespec="seconds") for m in rows if m["id"] in shown}
    assert set(shown) == {call["id"], result["id"], answer["id"]}


async def numbered(db, agent_id: str) -> dict[str | None, list[tuple[int, str]]]:
    """Each conversation's (seq, content) in seq order, by conversation (None: the default one)."""
    rows = await db.fetch("SELECT conversation_id, seq, content FROM message WHERE agent_id = $1 ORDER BY seq", agent_id)
    by_conversation: dict[str | None, list[tuple[int, str]]] = {}
    for row in rows:
        by_conversation.setdefault(row["conversation_id"], []).append((row["seq"], row["content"]))
    return by_conversation


async def test_each_conversation_numbers_its_own_messages_with_turns_of_two_conversations_at_once(client, llm, db):
    """No counter is shared: a message's seq follows its conversation's last, and turns of two
    conversations of one agent storing at the same time each number their own."""
    agent = await create_agent(client, **MODEL)
    one, other = [(await client.post("/v1/conversations/", params={"agent_id": agent["id"]})).json()["id"] for _ in "ab"]
    llm.default("ok")

    first = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "default"})
    sends = [
        client.post(f"/v1/conversations/{conversation}/messages", json={"input": f"{conversation} {n}", "streaming": False})
        for n in range(3)
        for conversation in (one, other)
    ]
    answers = await asyncio.gather(*sends)
    forked = (await client.post(f"/v1/conversations/{one}/fork")).json()["id"]
    stored = await numbered(db, agent["id"])

    assert first.status_code == 200 and all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert stored[None] == [(1, "default"), (2, "ok")]
    for conversation in (one, other):
        said = sorted(content for _, content in stored[conversation] if content != "ok")
        assert said == [f"{conversation} {n}" for n in range(3)]
        assert [seq for seq, _ in stored[conversation]] == list(range(1, 7))
        assert [content == "ok" for _, content in stored[conversation]] == [False, True] * 3  # each answer after its input
    assert stored[forked] == stored[one]  # a fork numbers its copies from 1, in the source's order
