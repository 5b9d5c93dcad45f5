"""Agent files through the official SDK: agents.import_file reads Letta's export and memvm's fixtures,
the imported agent answers with its old history in context, and export_file round-trips."""

import json
from pathlib import Path

import pytest
from letta_client import AsyncLetta, BadRequestError

from tests.support.agent_fields import EXPECTED, shown, with_every_field
from tests.support.scripted_llm import ScriptedLLM

FIXTURES = Path(__file__).parent.parent / "agentfiles" / "fixtures"


@pytest.mark.parametrize("name", ["letta-0.16.8-sample.af", "legacy-single-agent.af", "custom-tool-rules.af", "shared-block.af"])
async def test_the_sdk_imports_every_fixture(letta: AsyncLetta, name: str):
    with open(FIXTURES / name, "rb") as handle:
        result = await letta.agents.import_file(file=(name, handle, "application/json"))

    source = json.loads((FIXTURES / name).read_text())
    assert len(result.agent_ids) == len(source.get("agents", [source]))
    for agent_id in result.agent_ids:
        agent = await letta.agents.retrieve(agent_id, include=["agent.blocks", "agent.tools"])
        assert agent.blocks and agent.tools


async def test_an_imported_agent_answers_with_its_old_history(letta: AsyncLetta, llm: ScriptedLLM):
    with open(FIXTURES / "letta-0.16.8-sample.af", "rb") as handle:
        [agent_id] = (await letta.agents.import_file(file=handle, model="openai/scripted-model")).agent_ids
    llm.reply("You asked me to count words.")

    response = await letta.agents.messages.create(agent_id, input="What did I ask you before?")

    sent = [message.get("content") for message in llm.requests[-1]["messages"]]
    assert "Hello, can you check my draft intro?" in sent and "Great, thanks." in sent
    assert response.messages[-1].content == "You asked me to count words."


async def test_export_then_import_through_the_sdk(letta: AsyncLetta):
    with open(FIXTURES / "custom-tool-rules.af", "rb") as handle:
        [original] = (await letta.agents.import_file(file=handle)).agent_ids

    exported = await letta.agents.export_file(original)
    scrubbed = json.loads(await letta.agents.export_file(original, scrub_messages=True))
    legacy = json.loads(await letta.agents.export_file(original, use_legacy_format=True))
    [copy] = (await letta.agents.import_file(file=("copy.af", exported.encode(), "application/json"))).agent_ids
    [from_legacy] = (await letta.agents.import_file(file=("old.af", json.dumps(legacy).encode()))).agent_ids

    first, second = await letta.agents.retrieve(original), await letta.agents.retrieve(copy)
    assert [(b.label, b.value, b.limit) for b in first.blocks] == [(b.label, b.value, b.limit) for b in second.blocks]
    assert [r.type for r in first.tool_rules] == [r.type for r in second.tool_rules]
    assert scrubbed["agents"][0]["messages"] == [] and "core_memory" in legacy
    old = await letta.agents.messages.list(from_legacy, order="asc")
    new = await letta.agents.messages.list(copy, order="asc")
    assert [m.message_type for m in old.items] == [m.message_type for m in new.items]


async def test_every_stored_agent_field_survives_import_and_a_round_trip(letta: AsyncLetta):
    """Read as SDK users read an agent: its blocks and tools included (Letta sends the tags with the
    blocks), and its secrets, whose values stay masked."""
    include = ["agent.blocks", "agent.tools", "agent.secrets"]
    content = json.dumps(with_every_field()).encode()
    [imported] = (await letta.agents.import_file(file=("letta.af", content, "application/json"))).agent_ids
    exported = await letta.agents.export_file(imported)
    [again] = (await letta.agents.import_file(file=("memvm.af", exported.encode(), "application/json"))).agent_ids

    for agent_id in (imported, again):
        agent = await letta.agents.retrieve(agent_id, include=include)
        assert shown(agent.model_dump(exclude_none=True)) == EXPECTED


async def test_a_bad_file_is_a_bad_request(letta: AsyncLetta):
    with open(FIXTURES / "bad-file.af", "rb") as handle, pytest.raises(BadRequestError) as refused:
        await letta.agents.import_file(file=handle)
    assert "4 problem" in str(refused.value)
