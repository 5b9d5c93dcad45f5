"""Agents, core-memory blocks and REST errors through the official letta-client SDK, against a real
`memvm serve` process (one per module; each test makes its own agents and blocks)."""

import re

import httpx
import pytest
from letta_client import (
    APIStatusError,
    AsyncLetta,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

from memvm import __version__
from tests.support.sdk import MISSING_AGENT, MODEL, memory_value, new_agent, prompt_text, request_lines, unique
from tests.support.serve import Served

# ---------------------------------------------------------------- agents


async def test_health(letta: AsyncLetta):
    health = await letta.health()

    assert health.status == "ok"
    assert health.version == __version__


async def test_create_with_new_and_existing_blocks_model_tags_and_system(letta: AsyncLetta):
    shared = await letta.blocks.create(label="project", value="Project: memvm", limit=500, description="Shared notes")
    name = unique("creator")

    agent = await letta.agents.create(
        name=name,
        model=MODEL,
        system="You are a careful test agent.",
        tags=["sdk", "conformance"],
        memory_blocks=[
            {"label": "human", "value": "Name: Bob", "limit": 1000, "description": "About the user"},
            {"label": "persona", "value": "I am Sam."},
        ],
        block_ids=[shared.id],
    )

    assert agent.id.startswith("agent-")
    assert agent.name == name
    assert agent.agent_type == "letta_v1_agent"
    assert agent.model == MODEL
    assert agent.system == "You are a careful test agent."
    assert sorted(agent.tags) == ["conformance", "sdk"]
    by_label = {block.label: block for block in agent.blocks}
    assert set(by_label) == {"human", "persona", "project"}
    assert by_label["human"].value == "Name: Bob"
    assert by_label["human"].limit == 1000
    assert by_label["human"].description == "About the user"
    assert by_label["persona"].value == "I am Sam."
    assert by_label["project"].id == shared.id  # attached, not copied
    assert {block.label for block in agent.memory.blocks} == {"human", "persona", "project"}
    assert agent.llm_config is not None and agent.llm_config.model == "scripted-model"

    prompt = prompt_text(await letta.agents.recompile(agent.id, dry_run=True))
    assert prompt.startswith("You are a careful test agent.")
    assert "Name: Bob" in prompt and "Project: memvm" in prompt


async def test_list_auto_paginates_over_several_pages(letta: AsyncLetta):
    tag = unique("page")
    created = [(await letta.agents.create(name=f"{tag}-{i}", model=MODEL, tags=[tag])).id for i in range(5)]

    seen = []
    async for agent in letta.agents.list(tags=[tag], limit=2):
        seen.append(agent.id)
        assert len(seen) <= 10, f"pagination does not terminate: {seen}"

    assert sorted(seen) == sorted(created)
    assert len(seen) == len(set(seen)) == 5
    assert seen == list(reversed(created))  # default order: newest first

    first_page = await letta.agents.list(tags=[tag], limit=2)
    assert [agent.id for agent in first_page.items] == seen[:2]
    assert first_page.has_next_page()
    second_page = await first_page.get_next_page()
    assert [agent.id for agent in second_page.items] == seen[2:4]

    ascending = [agent.id async for agent in letta.agents.list(tags=[tag], limit=2, order="asc")]
    assert ascending == created


async def test_list_filters_by_name(letta: AsyncLetta):
    name = unique("named")
    agent = await letta.agents.create(name=name, model=MODEL)
    await letta.agents.create(name=unique("other"), model=MODEL)

    found = [found.id async for found in letta.agents.list(name=name)]

    assert found == [agent.id]


async def test_retrieve_includes_relations_only_when_asked(letta: AsyncLetta):
    created = await letta.agents.create(model=MODEL, tags=["t1"], memory_blocks=[{"label": "human", "value": "Name: Ann"}])

    bare = await letta.agents.retrieve(created.id)
    assert bare.id == created.id and bare.name == created.name
    assert bare.blocks == []
    assert bare.memory.blocks == []
    assert bare.tags == []
    assert bare.tools == []

    full = await letta.agents.retrieve(created.id, include=["agent.blocks", "agent.tags", "agent.tools"])
    assert [(block.label, block.value) for block in full.blocks] == [("human", "Name: Ann")]
    assert [block.label for block in full.memory.blocks] == ["human"]
    assert full.tags == ["t1"]
    assert sorted(tool.name for tool in full.tools) == ["conversation_search", "memory_insert", "memory_replace"]


async def test_update_name_and_system(letta: AsyncLetta):
    agent = await letta.agents.create(model=MODEL, name=unique("before"), memory_blocks=[{"label": "human", "value": "Bob"}])
    new_name = unique("after")

    updated = await letta.agents.update(agent.id, name=new_name, system="You are the updated agent.", tags=["v2"])

    assert updated.id == agent.id
    assert updated.name == new_name
    assert updated.system == "You are the updated agent."
    again = await letta.agents.retrieve(agent.id, include=["agent.tags"])
    assert again.name == new_name and again.system == "You are the updated agent."
    assert again.tags == ["v2"]
    prompt = prompt_text(await letta.agents.recompile(agent.id, dry_run=True))
    assert prompt.startswith("You are the updated agent.") and "Bob" in prompt


async def test_delete_then_retrieve_is_not_found(letta: AsyncLetta):
    agent = await letta.agents.create(model=MODEL)

    await letta.agents.delete(agent.id)

    with pytest.raises(NotFoundError) as raised:
        await letta.agents.retrieve(agent.id)
    assert raised.value.status_code == 404
    assert agent.id in raised.value.body["detail"]
    assert agent.id not in [found.id async for found in letta.agents.list(limit=1000)]


# ---------------------------------------------------------------- blocks


async def test_agent_blocks_list_retrieve_update(letta: AsyncLetta):
    agent = await new_agent(letta)

    listed = [block async for block in letta.agents.blocks.list(agent.id)]
    assert [(block.label, block.value) for block in listed] == [("human", "Name: Bob"), ("persona", "I am Sam.")]
    assert all(block.id.startswith("block-") for block in listed)

    human = await letta.agents.blocks.retrieve("human", agent_id=agent.id)
    assert human.id == listed[0].id and human.label == "human" and human.value == "Name: Bob"
    assert human.limit == 100000

    updated = await letta.agents.blocks.update(
        "human", agent_id=agent.id, value="Name: Bob Smith", description="Facts about the user"
    )
    assert updated.id == human.id
    assert updated.value == "Name: Bob Smith"
    assert updated.description == "Facts about the user"
    again = await letta.agents.blocks.retrieve("human", agent_id=agent.id)
    assert again.value == "Name: Bob Smith"

    # Editing a block recompiles the stored prompt: a dry run (which keeps the stored timestamp) matches it.
    prompt = prompt_text(await letta.agents.recompile(agent.id, dry_run=True))
    assert memory_value(prompt, "human") == "Name: Bob Smith"
    assert "Facts about the user" in prompt


async def test_agent_blocks_list_pages(letta: AsyncLetta):
    agent = await new_agent(letta, memory_blocks=[{"label": f"b{i}", "value": f"v{i}"} for i in range(5)])

    labels = [block.label async for block in letta.agents.blocks.list(agent.id, limit=2)]

    assert labels == ["b0", "b1", "b2", "b3", "b4"]


async def test_attach_and_detach_a_standalone_block(letta: AsyncLetta):
    agent = await new_agent(letta)
    notes = await letta.blocks.create(label="notes", value="Remember the milk", limit=200)

    attached = await letta.agents.blocks.attach(notes.id, agent_id=agent.id)

    assert attached.id == agent.id
    labels = [block.label async for block in letta.agents.blocks.list(agent.id)]
    assert labels == ["human", "persona", "notes"]
    fetched = await letta.agents.blocks.retrieve("notes", agent_id=agent.id)
    assert fetched.id == notes.id and fetched.value == "Remember the milk"
    # Attaching again is idempotent.
    await letta.agents.blocks.attach(notes.id, agent_id=agent.id)
    assert [block.label async for block in letta.agents.blocks.list(agent.id)] == ["human", "persona", "notes"]
    prompt = prompt_text(await letta.agents.recompile(agent.id))
    assert memory_value(prompt, "notes") == "Remember the milk"

    detached = await letta.agents.blocks.detach(notes.id, agent_id=agent.id)

    assert detached.id == agent.id
    assert [block.label async for block in letta.agents.blocks.list(agent.id)] == ["human", "persona"]
    with pytest.raises(NotFoundError) as raised:
        await letta.agents.blocks.retrieve("notes", agent_id=agent.id)
    assert "notes" in raised.value.body["detail"]
    survivor = await letta.blocks.retrieve(notes.id)  # the block itself is kept
    assert survivor.value == "Remember the milk"
    assert "Remember the milk" not in prompt_text(await letta.agents.recompile(agent.id))


async def test_standalone_block_crud(letta: AsyncLetta):
    label = unique("kb")

    created = await letta.blocks.create(
        label=label, value="alpha", limit=1000, description="Knowledge", metadata={"source": "sdk"}, tags=["kb"]
    )
    assert created.id.startswith("block-")
    assert (created.label, created.value, created.limit, created.description) == (label, "alpha", 1000, "Knowledge")
    assert created.metadata == {"source": "sdk"}
    assert created.tags == ["kb"]
    assert created.read_only is False

    fetched = await letta.blocks.retrieve(created.id)
    assert (fetched.id, fetched.label, fetched.value) == (created.id, label, "alpha")

    listed = [block async for block in letta.blocks.list(label=label)]
    assert [block.id for block in listed] == [created.id]

    updated = await letta.blocks.update(created.id, value="beta", limit=2000, read_only=True)
    assert (updated.id, updated.value, updated.limit, updated.read_only) == (created.id, "beta", 2000, True)
    assert updated.description == "Knowledge"  # untouched fields stay
    assert (await letta.blocks.retrieve(created.id)).value == "beta"

    deleted = await letta.blocks.delete(created.id)
    assert deleted is None
    with pytest.raises(NotFoundError) as raised:
        await letta.blocks.retrieve(created.id)
    assert created.id in raised.value.body["detail"]
    assert [block async for block in letta.blocks.list(label=label)] == []


async def test_blocks_list_auto_paginates(letta: AsyncLetta):
    label = unique("many")
    created = [(await letta.blocks.create(label=label, value=f"v{i}")).id for i in range(5)]

    seen = [block.id async for block in letta.blocks.list(label=label, limit=2)]

    assert seen == created  # /v1/blocks/ defaults to oldest first


async def test_shared_block_lists_its_agents_and_edits_reach_every_agent(letta: AsyncLetta):
    shared = await letta.blocks.create(label="team", value="Team: blue")
    first = await new_agent(letta, block_ids=[shared.id])
    second = await new_agent(letta, block_ids=[shared.id])
    await new_agent(letta)  # not attached

    agents = [agent async for agent in letta.blocks.agents.list(shared.id)]
    assert sorted(agent.id for agent in agents) == sorted([first.id, second.id])

    await letta.blocks.update(shared.id, value="Team: green")

    for agent in (first, second):
        prompt = prompt_text(await letta.agents.recompile(agent.id, dry_run=True))
        assert memory_value(prompt, "team") == "Team: green"

    await letta.blocks.delete(shared.id)
    assert [block.label async for block in letta.agents.blocks.list(first.id)] == ["human", "persona"]
    with pytest.raises(NotFoundError):
        await letta.blocks.agents.list(shared.id)


async def test_recompile_returns_the_prompt_with_block_values_and_sizes(letta: AsyncLetta):
    agent = await new_agent(letta, memory_blocks=[{"label": "human", "value": "Name: Bob Smith", "limit": 5000}])

    prompt = prompt_text(await letta.agents.recompile(agent.id))

    assert memory_value(prompt, "human") == "Name: Bob Smith"
    assert "chars_current=15" in prompt
    assert "chars_limit=5000" in prompt
    assert "<memory_metadata>" in prompt
    assert agent.id in prompt
    # update_timestamp and dry_run reach the server as query parameters and are honoured.
    dry = prompt_text(await letta.agents.recompile(agent.id, dry_run=True, update_timestamp=False))
    assert dry == prompt


# ---------------------------------------------------------------- errors


def detail(error: APIStatusError) -> str:
    assert isinstance(error.body, dict) and isinstance(error.body.get("detail"), str), error.body
    return error.body["detail"]


async def test_without_a_valid_key_the_sdk_gets_authentication_errors(memvm_server: Served, letta: AsyncLetta):
    agent = await new_agent(letta)
    async with AsyncLetta(base_url=memvm_server.base_url, api_key=None, max_retries=0) as anonymous:
        with pytest.raises(AuthenticationError) as missing:
            await anonymous.agents.retrieve(agent.id)
    async with AsyncLetta(base_url=memvm_server.base_url, api_key="mvk_not-a-key", max_retries=0) as impostor:
        with pytest.raises(AuthenticationError):
            await impostor.agents.list()

    assert "Authorization: Bearer" in detail(missing.value)
    assert (await letta.agents.retrieve(agent.id)).id == agent.id


async def test_unknown_agent_is_not_found(letta: AsyncLetta, sdk_requests: list[httpx.Request]):
    with pytest.raises(NotFoundError) as retrieve:
        await letta.agents.retrieve(MISSING_AGENT)
    with pytest.raises(NotFoundError) as send:
        await letta.agents.messages.create(MISSING_AGENT, input="hello?")
    with pytest.raises(NotFoundError) as stream:
        await letta.agents.messages.create(MISSING_AGENT, input="hello?", streaming=True)
    with pytest.raises(NotFoundError) as blocks:
        await letta.agents.blocks.retrieve("human", agent_id=MISSING_AGENT)

    for raised in (retrieve, send, stream, blocks):
        assert raised.value.status_code == 404
        assert MISSING_AGENT in detail(raised.value)
        assert MISSING_AGENT in str(raised.value)  # the SDK's message carries memvm's detail
    assert len(sdk_requests) == 4  # 404s are not retried


async def test_unknown_block_label_names_the_agents_labels(letta: AsyncLetta):
    agent = await new_agent(letta)

    with pytest.raises(NotFoundError) as raised:
        await letta.agents.blocks.retrieve("nope", agent_id=agent.id)

    assert "'nope'" in detail(raised.value) and "human" in detail(raised.value)


async def test_label_clash_on_attach_is_a_conflict_and_not_retried(letta: AsyncLetta, sdk_requests: list[httpx.Request]):
    agent = await new_agent(letta)
    other_human = await letta.blocks.create(label="human", value="Name: Alice")
    sdk_requests.clear()

    with pytest.raises(ConflictError) as raised:
        await letta.agents.blocks.attach(other_human.id, agent_id=agent.id)

    assert raised.value.status_code == 409
    message = detail(raised.value)
    assert "'human'" in message and other_human.id in message and agent.id in message
    assert raised.value.response.headers.get("x-should-retry") == "false"
    # The SDK retries 409 twice by default unless told not to: exactly one request went out.
    assert request_lines(sdk_requests) == [f"PATCH /v1/agents/{agent.id}/core-memory/blocks/attach/{other_human.id}"]
    # Nothing changed.
    assert [(b.label, b.value) async for b in letta.agents.blocks.list(agent.id)] == [
        ("human", "Name: Bob"),
        ("persona", "I am Sam."),
    ]


async def test_duplicate_labels_at_creation_are_a_conflict(letta: AsyncLetta, sdk_requests: list[httpx.Request]):
    existing = await letta.blocks.create(label="human", value="Name: Alice")
    sdk_requests.clear()

    with pytest.raises(ConflictError) as raised:
        await new_agent(letta, block_ids=[existing.id])

    assert "'human'" in detail(raised.value)
    assert len(sdk_requests) == 1


async def test_malformed_ids_are_unprocessable(letta: AsyncLetta, sdk_requests: list[httpx.Request]):
    with pytest.raises(UnprocessableEntityError) as agent:
        await letta.agents.retrieve("agent-123")
    with pytest.raises(UnprocessableEntityError) as block:
        await letta.blocks.retrieve("not-a-block")

    assert agent.value.status_code == 422
    assert "'agent-123'" in detail(agent.value) and "agent-<uuid4>" in detail(agent.value)
    assert "'not-a-block'" in detail(block.value) and "block-<uuid4>" in detail(block.value)
    assert len(sdk_requests) == 2


async def test_over_limit_block_update_names_both_numbers(letta: AsyncLetta):
    agent = await new_agent(letta, memory_blocks=[{"label": "human", "value": "Bob", "limit": 10}])
    too_long = "x" * 25

    with pytest.raises(UnprocessableEntityError) as via_agent:
        await letta.agents.blocks.update("human", agent_id=agent.id, value=too_long)
    block = await letta.agents.blocks.retrieve("human", agent_id=agent.id)
    with pytest.raises(UnprocessableEntityError) as via_block:
        await letta.blocks.update(block.id, value=too_long)
    with pytest.raises(UnprocessableEntityError) as on_create:
        await letta.blocks.create(label="tiny", value=too_long, limit=10)

    for raised in (via_agent, via_block, on_create):
        assert raised.value.status_code == 422
        numbers = re.findall(r"\d+", detail(raised.value))
        assert "25" in numbers and "10" in numbers, detail(raised.value)
    assert block.value == "Bob"  # unchanged


async def test_block_writes_over_the_limit_are_unprocessable_and_change_nothing(
    letta: AsyncLetta, sdk_requests: list[httpx.Request]
):
    """Letta's SDK raises UnprocessableEntityError (422) for a block over its limit; client code
    catches that class. Every such write through the SDK gets it, and nothing is stored."""
    agent = await new_agent(letta, memory_blocks=[{"label": "human", "value": "Name: Bob", "limit": 12}])
    before = await letta.agents.blocks.with_raw_response.retrieve("human", agent_id=agent.id)
    block = await before.parse()
    prompt = prompt_text(await letta.agents.recompile(agent.id, dry_run=True, update_timestamp=False))
    label = unique("tiny")
    sdk_requests.clear()

    refused = []
    for write in (
        lambda: letta.blocks.update(block.id, value="Name: Robert Smith"),
        lambda: letta.agents.blocks.update("human", agent_id=agent.id, value="Name: Robert Smith"),
        lambda: letta.blocks.update(block.id, limit=5),  # below the current length
        lambda: letta.blocks.update(block.id, value="Name: Robert Smith", limit=15),
        lambda: letta.blocks.create(label=label, value="x" * 13, limit=12),
        lambda: new_agent(letta, name=label, memory_blocks=[{"label": "human", "value": "x" * 13, "limit": 12}]),
    ):
        with pytest.raises(UnprocessableEntityError) as raised:
            await write()
        refused.append(raised.value)

    for error in refused:
        assert error.status_code == 422
        assert error.response.headers.get("x-should-retry") == "false"
    assert "18 characters, over its limit of 12" in detail(refused[0])  # the limit, the length,
    assert "Shorten the value by 6 characters" in detail(refused[0])  # and how to fix it
    assert "Limit 5" in detail(refused[2]) and "9 characters" in detail(refused[2])
    assert "18 characters, over its limit of 15" in detail(refused[3])
    assert len(sdk_requests) == len(refused)  # one request each: nothing retried
    # Nothing changed: same value, limit and version, same prompt, nothing created.
    after = await letta.agents.blocks.with_raw_response.retrieve("human", agent_id=agent.id)
    kept = await after.parse()
    assert (kept.value, kept.limit) == ("Name: Bob", 12)
    assert after.headers["etag"] == before.headers["etag"]
    assert prompt_text(await letta.agents.recompile(agent.id, dry_run=True, update_timestamp=False)) == prompt
    assert [found.id async for found in letta.blocks.list(label=label)] == []
    assert [found.id async for found in letta.agents.list(name=label)] == []
    with pytest.raises(BadRequestError):  # other unacceptable input stays a 400
        await letta.blocks.update(block.id, label="bad label!")
