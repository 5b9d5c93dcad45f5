"""Export → import is lossless: the imported agent has the same blocks, prompt, history, tools and
rules. Checked over generated agents (Hypothesis draws the shapes) and over an agent built through
the API with real turns."""

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.agentfiles import Shape, dumps
from tests.support.api import compiled_prompt, create_agent

LABELS = st.sampled_from(["persona", "human", "notes", "style", "project/plan"])
BLOCK = st.tuples(LABELS, st.text(alphabet="abc xyzĄ\n", max_size=40), st.integers(40, 5000))
SHAPES = st.builds(
    Shape,
    blocks=st.lists(BLOCK, min_size=1, max_size=4, unique_by=lambda block: block[0]),
    shared_blocks=st.integers(0, 1),
    turns=st.integers(0, 7),
    render_mode=st.sampled_from(["standard", "line_numbered", "git"]),
    tags=st.lists(st.sampled_from(["a", "b", "c"]), unique=True),
    timezone=st.sampled_from(["UTC", "Europe/Warsaw", "America/New_York"]),
    with_rules=st.booleans(),
    window=st.none() | st.integers(1, 6),
)


def generated_shapes(count: int) -> list[Shape]:
    drawn: list[Shape] = []

    @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(SHAPES)
    def draw(shape: Shape) -> None:
        drawn.append(shape)

    draw()
    return drawn


async def upload(client, content: bytes, **form) -> dict:
    response = await client.post("/v1/agents/import", files={"file": ("agent.af", content, "application/json")}, data=form)
    assert response.status_code == 200, response.text
    return response.json()


async def export(client, agent_id: str, **params) -> dict:
    response = await client.get(f"/v1/agents/{agent_id}/export", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def comparable(file: dict, agent_id: str) -> dict:
    """The file without what must differ between two servers: the export time, and the agent's id
    and compile time in its compiled prompt."""
    file = {key: value for key, value in file.items() if key != "created_at"}
    for agent in file["agents"]:
        if agent["messages"]:
            agent["messages"][0]["created_at"] = "<compiled>"  # the system message: when it was compiled
    text = json.dumps(file)
    text = text.replace(agent_id, "<agent>")
    return json.loads(re.sub(r"System prompt last recompiled: [^\\]*", "recompiled", text))


def same_prompt(first: str, second: str, first_id: str, second_id: str) -> bool:
    def normal(prompt: str, agent_id: str) -> str:
        return re.sub(r"System prompt last recompiled: .*", "", prompt.replace(agent_id, "<agent>"))

    return normal(first, first_id) == normal(second, second_id)


async def test_generated_agents_round_trip(client):
    for shape in generated_shapes(12):
        original = (await upload(client, dumps(shape)))["agent_ids"][0]
        first = await export(client, original)
        copy = (await upload(client, json.dumps(first).encode()))["agent_ids"][0]
        second = await export(client, copy)

        assert comparable(first, original) == comparable(second, copy), shape
        assert same_prompt(await compiled_prompt(client, original), await compiled_prompt(client, copy), original, copy)
        assert len(first["agents"][0]["in_context_message_ids"]) == len(second["agents"][0]["in_context_message_ids"])


async def test_an_agent_built_through_the_api_round_trips(client, llm):
    tool = await client.post("/v1/tools/", json={"source_code": WORD_COUNT})
    assert tool.status_code == 200, tool.text
    agent = await create_agent(
        client,
        model="openai/scripted-model",
        memory_blocks=[{"label": "human", "value": "Ana", "limit": 300}, {"label": "notes", "value": "", "read_only": True}],
        tool_ids=[tool.json()["id"]],
        tool_rules=[{"type": "max_count_per_step", "tool_name": "word_count", "max_count_limit": 1}],
        memory_render_mode="line_numbered",
        tags=["crm"],
    )
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})]).reply("Noted.")
    assert (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "I like tea"})).status_code == 200

    file = await export(client, agent["id"])
    copy_id = (await upload(client, json.dumps(file).encode()))["agent_ids"][0]
    original = (await client.get(f"/v1/agents/{agent['id']}")).json()
    copy = (await client.get(f"/v1/agents/{copy_id}")).json()

    def blocks(view: dict) -> list:
        return [(b["label"], b["value"], b["limit"], b["read_only"], b["description"]) for b in view["blocks"]]

    assert blocks(copy) == blocks(original) and "Likes tea" in blocks(copy)[0][1]
    assert [t["name"] for t in copy["tools"]] == [t["name"] for t in original["tools"]]
    assert copy["tool_rules"] == original["tool_rules"] and copy["memory_render_mode"] == "line_numbered"
    assert same_prompt(await compiled_prompt(client, agent["id"]), await compiled_prompt(client, copy_id), agent["id"], copy_id)
    history = [await client.get(f"/v1/agents/{i}/messages", params={"order": "asc"}) for i in (agent["id"], copy_id)]
    keys = ("message_type", "content", "tool_call", "tool_return", "status", "date")
    first, second = ([{k: m.get(k) for k in keys} for m in h.json()] for h in history)
    assert first == second and len(first) == 4


WORD_COUNT = '''def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.

    Returns:
        int: The number of words.
    """
    return len(text.split())
'''


async def test_heartbeats_approvals_reasoning_summary_and_passages_round_trip(client, llm):
    """A MemGPT-style agent whose history holds every kind memvm stores: an approval request and its
    answer, a heartbeat, reasoning, a compaction summary; plus archival passages. The copy's next
    model call is the original's, and its passages are found by search."""
    agent = await create_agent(
        client,
        model="openai/scripted-model",
        agent_type="memgpt_v2_agent",
        tools=["archival_memory_search"],
        tool_rules=[{"type": "requires_approval", "tool_name": "memory_insert"}],
    )
    agent_id = agent["id"]
    inserted = await client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": "The cat is called Mruczek."})
    assert inserted.status_code == 200, inserted.text
    insert = {"label": "human", "new_string": "Likes tea", "request_heartbeat": True}
    llm.reply(tool_calls=[("memory_insert", insert)], reasoning="Worth keeping.")
    waiting = (await client.post(f"/v1/agents/{agent_id}/messages", json={"input": "I like tea"})).json()
    call_id = waiting["messages"][-1]["tool_call"]["tool_call_id"]
    llm.reply(tool_calls=[("send_message", {"message": "Noted."})])
    approval = {"type": "approval", "approvals": [{"type": "approval", "tool_call_id": call_id, "approve": True}]}
    answered = await client.post(f"/v1/agents/{agent_id}/messages", json={"messages": [approval]})
    assert answered.status_code == 200, answered.text
    llm.reply("They like tea.")
    assert (await client.post(f"/v1/agents/{agent_id}/summarize")).status_code == 200

    file = await export(client, agent_id, include_archival="true")
    copy_id = (await upload(client, json.dumps(file).encode()))["agent_ids"][0]
    again = await export(client, copy_id, include_archival="true")
    seen = []
    for target in (agent_id, copy_id):
        llm.reply(tool_calls=[("send_message", {"message": "Hi."})])
        assert (await client.post(f"/v1/agents/{target}/messages", json={"input": "hello"})).status_code == 200
        seen.append([m for m in llm.requests[-1]["messages"] if m["role"] != "system"])
    kinds = [m.get("memvm_kind") for m in file["agents"][0]["messages"]]
    found = await client.get(f"/v1/agents/{copy_id}/archival-memory/search", params={"query": "cat name"})

    assert {"heartbeat", "approval", "summary"} <= set(kinds)
    assert kinds == [m.get("memvm_kind") for m in again["agents"][0]["messages"]]
    assert seen[0] == seen[1] and "They like tea." in json.dumps(seen[1])
    assert "Mruczek" in found.text
    messages = [await client.get(f"/v1/agents/{i}/messages", params={"order": "asc"}) for i in (agent_id, copy_id)]
    keys = ("message_type", "content", "reasoning", "tool_call", "tool_return", "approvals", "date")
    first, second = ([{k: m.get(k) for k in keys} for m in h.json()] for h in messages)
    assert first[:-4] == second[:-4]  # the last turn ran on each side separately
