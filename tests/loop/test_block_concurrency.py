"""32 writers on one block shared by several agents: REST PATCHes with and without If-Match, and agents'
tool edits from concurrent turns. Every write is applied or refused (412/409, or a tool error the model
sees); the block's history has no gaps, replaying the applied writes in version order gives each
version's value and the final one, and no acknowledged write is missing from it."""

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from memvm.memory import edits
from tests.support.api import create_agent, create_block
from tests.support.pg import next_seq

MODEL = {"model": "openai/scripted-model"}
WRITERS = 32
WRITES_EACH = 4
AGENTS = 8
LABEL = "shared"


@dataclass
class Tally:
    patches: dict[int, str] = field(default_factory=dict)  # version a 200 PATCH answered → the value it sent
    if_match: dict[int, int] = field(default_factory=dict)  # version → the If-Match that PATCH carried
    tool_edits: dict[str, dict] = field(default_factory=dict)  # tool_call_id of a successful edit → its call
    refused: list[str] = field(default_factory=list)  # "412", "409" or "tool error", one per refused write
    unexpected: list[str] = field(default_factory=list)


def answer(body: dict) -> dict:
    """Each turn's user message is the tool call to make; after its result, the turn ends."""
    last = body["messages"][-1]
    delay = random.uniform(0, 0.02)
    if last["role"] == "tool":
        return {"content": "ok", "delay": delay}
    call = json.loads(last["content"])
    return {"tool_calls": [(call["name"], call["arguments"])], "delay": delay}


async def patch_writer(client, block_id: str, writer: int, tally: Tally, *, conditional: bool) -> None:
    for write in range(WRITES_EACH):
        value = f"<patch {writer}.{write}>"
        headers = {}
        if conditional:
            current = await client.get(f"/v1/blocks/{block_id}")
            headers["If-Match"] = current.headers["etag"]
            await asyncio.sleep(random.uniform(0, 0.01))  # widen the window in which another writer gets in
        response = await client.patch(f"/v1/blocks/{block_id}", json={"value": value}, headers=headers)
        if response.status_code == 200:
            version = response.json()["version"]
            assert response.headers["etag"] == f'"{version}"'
            tally.patches[version] = value
            if conditional:
                tally.if_match[version] = int(headers["If-Match"].strip('"'))
        elif response.status_code in (409, 412):
            tally.refused.append(str(response.status_code))
        else:
            tally.unexpected.append(f"PATCH {value}: {response.status_code} {response.text}")


async def tool_writer(client, agent_id: str, writer: int, tally: Tally) -> None:
    for write in range(WRITES_EACH):
        if write % 2 == 0:  # appends a line; refused when it names a line past the end
            arguments = {"label": LABEL, "new_string": f"<tool {writer}.{write}>"}
            if writer % 4 == 3:
                arguments["insert_line"] = random.choice([0, 1, 2, 3])
        else:  # replaces the newest PATCH seen: refused if another write replaced it first
            victim = tally.patches[max(tally.patches)] if tally.patches else "<patch 0.0>"
            arguments = {"label": LABEL, "old_string": victim, "new_string": f"<tool {writer}.{write}>"}
        call = {"name": "memory_insert" if write % 2 == 0 else "memory_replace", "arguments": arguments}
        response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": json.dumps(call)})
        if response.status_code == 409:
            tally.refused.append("409 busy")
            continue
        if response.status_code != 200:
            tally.unexpected.append(f"turn {call}: {response.status_code} {response.text}")
            continue
        messages = response.json()["messages"]
        [sent] = [m for m in messages if m["message_type"] == "tool_call_message"]
        [returned] = [m for m in messages if m["message_type"] == "tool_return_message"]
        call_id = sent["tool_call"]["tool_call_id"]
        assert returned["tool_call_id"] == call_id
        if returned["status"] == "success":
            tally.tool_edits[call_id] = call
        else:
            tally.refused.append("tool error")


async def full_history(client, block_id: str) -> list[dict]:
    """Oldest first."""
    entries: list[dict] = []
    params: dict = {"limit": 1000}
    while True:
        response = await client.get(f"/v1/blocks/{block_id}/history", params=params)
        assert response.status_code == 200, response.text
        entries += response.json()
        if len(response.json()) < params["limit"]:
            return entries[::-1]
        params["before"] = entries[-1]["version"]


def replayed(call: dict, value: str) -> str:
    arguments = call["arguments"]
    if call["name"] == "memory_insert":
        return edits.insert_lines(LABEL, value, arguments["new_string"], arguments.get("insert_line"))
    return edits.replace_unique(LABEL, value, arguments["old_string"], arguments["new_string"])


async def test_32_writers_on_a_shared_block_lose_nothing_and_leave_a_gapless_history(client, llm):
    llm.respond(answer)
    block = await create_block(client, label=LABEL, value="start", limit=20_000)
    agents = [(await create_agent(client, **MODEL, block_ids=[block["id"]]))["id"] for _ in range(AGENTS)]
    tally = Tally()
    writers = []
    for writer in range(WRITERS):
        if writer % 4 < 2:
            writers.append(patch_writer(client, block["id"], writer, tally, conditional=writer % 4 == 1))
        else:
            writers.append(tool_writer(client, agents[len(writers) // 2 % AGENTS], writer, tally))

    started = time.monotonic()
    await asyncio.gather(*writers)
    elapsed = time.monotonic() - started

    final = (await client.get(f"/v1/blocks/{block['id']}")).json()
    history = await full_history(client, block["id"])
    versions = [entry["version"] for entry in history]
    value, lost, phantom, mismatched = "start", [], [], []
    seen_patches, seen_calls = set(), set()
    for entry in history[1:]:
        before, value = value, entry["new"].get("value", value)
        call_id = entry["actor"]["tool_call_id"]
        if entry["actor"]["type"] == "agent":
            if call_id not in tally.tool_edits:
                phantom.append(entry["version"])
                continue
            seen_calls.add(call_id)
            expected = replayed(tally.tool_edits[call_id], before)
        elif entry["version"] in tally.patches:
            seen_patches.add(entry["version"])
            expected = tally.patches[entry["version"]]
            if entry["version"] in tally.if_match and tally.if_match[entry["version"]] != entry["version"] - 1:
                mismatched.append(entry["version"])  # applied over a version its If-Match did not name
        else:
            phantom.append(entry["version"])
            continue
        if value != expected:
            mismatched.append(entry["version"])
    lost = [v for v in tally.patches if v not in seen_patches] + [c for c in tally.tool_edits if c not in seen_calls]
    applied = len(tally.patches) + len(tally.tool_edits)
    print(
        f"\nblock concurrency: {WRITERS} writers, {WRITERS * WRITES_EACH} writes in {elapsed:.1f}s: "
        f"{applied} applied ({len(tally.patches)} PATCH, {len(tally.tool_edits)} tool), {len(tally.refused)} refused "
        f"{dict(Counter(tally.refused))}, "
        f"{len(lost)} lost; history versions 1..{versions[-1]}, gaps: {sorted(set(range(1, versions[-1] + 1)) - set(versions))}"
    )

    assert tally.unexpected == []
    assert applied + len(tally.refused) == WRITERS * WRITES_EACH
    assert versions == list(range(1, len(history) + 1)) and history[0]["change"] == "create"
    assert lost == [] and phantom == [] and mismatched == []
    assert final["version"] == versions[-1] == 1 + applied
    assert final["value"] == value
    assert tally.refused and tally.patches and tally.tool_edits  # the mix really happened
    for agent_id in agents:  # every agent shows the final value
        shown = (await client.get(f"/v1/agents/{agent_id}/core-memory/blocks/{LABEL}")).json()
        assert shown["value"] == final["value"]


async def test_a_block_write_does_not_wait_for_a_turn_that_stored_messages_of_an_attached_agent(client, db):
    """A step stores its messages (the foreign key takes a key-share lock on the agent row) before its
    tool edits lock a block; a block write locks the block, then the agents it recompiles. Were that a
    FOR UPDATE of the agents, each would wait for the other: a deadlock, and a 500 for one of them."""
    block = await create_block(client, label=LABEL, value="start")
    agent = await create_agent(client, **MODEL, block_ids=[block["id"]])
    step = db.transaction()
    await step.start()
    try:
        await db.execute(
            "INSERT INTO message (id, organization_id, agent_id, role, kind, content, in_context, embed_attempts, seq)"
            f" SELECT 'message-held', organization_id, id, 'user', 'message', 'hi', true, 0, {next_seq('agent.id')}"
            " FROM agent WHERE id = $1",
            agent["id"],
        )
        response = await asyncio.wait_for(client.patch(f"/v1/blocks/{block['id']}", json={"value": "edited"}), 5)
    finally:
        await step.rollback()

    assert response.status_code == 200 and response.json()["version"] == 2
    shown = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/{LABEL}")
    assert shown.json()["value"] == "edited"


async def test_a_step_editing_its_own_block_then_a_shared_one_does_not_deadlock_with_a_block_write(client, llm, db):
    """One step, two tool edits: the agent's own block (which recompiles the agent), then a shared block
    that a PATCH holds. The PATCH, having locked the shared block, goes on to lock the agents it
    recompiles. Had the step locked its agent at the first edit, each would wait for the other: a
    deadlock, and an error for one of them. The step recompiles once, after its last block lock."""
    shared = await create_block(client, label=LABEL, value="start")
    agent = await create_agent(client, **MODEL, block_ids=[shared["id"]])
    calls = [
        ("memory_insert", {"label": "human", "new_string": "likes tea"}),
        ("memory_insert", {"label": LABEL, "new_string": "x"}),
    ]
    llm.reply(tool_calls=calls).reply("done")
    patch = db.transaction()
    await patch.start()
    try:
        await db.execute("SET LOCAL lock_timeout = '10s'")
        await db.execute("SELECT 1 FROM block WHERE id = $1 FOR UPDATE", shared["id"])
        turn = asyncio.create_task(client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "remember"}))
        for _ in range(500):  # until the step waits for the shared block
            if await db.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the step never reached the shared block")
        await db.execute("SELECT 1 FROM agent WHERE id = $1 FOR NO KEY UPDATE", agent["id"])  # the PATCH's recompile
    finally:
        await patch.rollback()
    response = await asyncio.wait_for(turn, 10)

    assert response.status_code == 200, response.text
    returns = [m for m in response.json()["messages"] if m["message_type"] == "tool_return_message"]
    assert [m["status"] for m in returns] == ["success", "success"]
    compiled = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])
    assert "likes tea" in compiled and "start\nx" in compiled  # recompiled once, with both edits
