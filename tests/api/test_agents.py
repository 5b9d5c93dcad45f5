import pytest

from tests.support.api import compiled_prompt, create_agent, create_block, table_counts

UNKNOWN_AGENT = "agent-00000000-0000-4000-8000-000000000000"


async def test_create_agent_returns_blocks_in_given_order_with_defaults(client):
    agent = await create_agent(client, name="Bob's helper", tags=["a", "b"], metadata={"k": 1})

    assert agent["id"].startswith("agent-")
    assert agent["name"] == "Bob's helper"
    assert agent["agent_type"] == "letta_v1_agent"
    assert agent["timezone"] == "UTC"
    assert agent["memory_render_mode"] == "standard"
    assert agent["tags"] == ["a", "b"] and agent["metadata"] == {"k": 1}
    assert [b["label"] for b in agent["blocks"]] == ["human", "persona"]
    assert agent["memory"]["blocks"] == agent["blocks"]
    human = agent["blocks"][0]
    assert human["limit"] == 100000 and human["version"] == 1 and human["read_only"] is False
    assert "person you are talking with" in human["description"]


async def test_create_agent_attaches_existing_blocks_and_compiles_prompt(client):
    shared = await create_block(client, label="project", value="Ship memvm")

    agent = await create_agent(client, block_ids=[shared["id"]], system="Base rules.\n{CORE_MEMORY}\nEnd.")

    assert [b["label"] for b in agent["blocks"]] == ["human", "persona", "project"]
    prompt = await compiled_prompt(client, agent["id"])
    assert prompt.startswith("Base rules.\n<memory_blocks>")
    assert prompt.endswith("</memory_metadata>\nEnd.")
    assert "<project>" in prompt and "Ship memvm" in prompt and f"AGENT_ID: {agent['id']}" in prompt


async def test_create_agent_with_model_handle_derives_llm_config(client):
    agent = await create_agent(client, model="openai/gpt-4o-mini", context_window_limit=64000)

    assert agent["model"] == "openai/gpt-4o-mini"
    assert agent["llm_config"]["model"] == "gpt-4o-mini"
    assert agent["llm_config"]["context_window"] == 64000


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"memory_blocks": [{"label": "human", "value": "x" * 11, "limit": 10}]}, 422, "11 characters, over its limit of 10"),
        ({"memory_blocks": [{"label": "human", "value": "a"}, {"label": "human", "value": "b"}]}, 409, "share the label 'human'"),
        ({"memory_blocks": [{"label": "bad label!", "value": "a"}]}, 400, "Invalid block label"),
        ({"memory_blocks": [{"label": "human", "value": 5}]}, 422, "memory_blocks.0.value"),
        ({"memory_blocks": [{"label": "human", "limit": 0}]}, 422, "memory_blocks.0.limit"),
        ({"block_ids": ["block-nope"]}, 422, "expected 'block-<uuid4>'"),
        ({"block_ids": ["block-00000000-0000-4000-8000-000000000000"]}, 404, "Blocks not found"),
        ({"timezone": "Mars/Olympus"}, 422, "unknown timezone"),
        ({"name": "bad/name"}, 422, "body.name"),
        ({"memory_render_mode": "fancy"}, 422, "memory_render_mode"),
        ({"model": "gpt-4o"}, 400, "is not a handle"),  # Letta answers 400 too
        # Found by Schemathesis: the endpoint was stored, and summarizing the agent was a 500 (httpx InvalidURL).
        ({"llm_config": {"model": "m", "model_endpoint": "h\ttp://x"}}, 422, "body.llm_config.model_endpoint"),
        ({"llm_config": {"model": "m", "model_endpoint": "http://a b/v1"}}, 422, "body.llm_config.model_endpoint"),
        ({"llm_config": {"model": "m", "model_endpoint": "file:///etc"}}, 422, "body.llm_config.model_endpoint"),
        # The HTTP client raises these when it builds the request, not as connection errors.
        ({"llm_config": {"model": "m", "model_endpoint": "http://host:port/v1"}}, 422, "is not a valid URL"),
        ({"llm_config": {"model": "m", "model_endpoint": "http://[::1/v1"}}, 422, "is not a valid URL"),
        ({"llm_config": {"model": "m", "model_endpoint": "http://127.0.0.1:99999/v1"}}, 422, "is not a valid URL"),
        ({"context_window_limit": 2**31}, 422, "body.context_window_limit"),  # a 32-bit column: was a 500
        # Accepted once, then every turn and archival insert of the agent failed.
        ({"embedding": "openai/unknown-model"}, 400, "set MEMVM_EMBEDDING_DIM"),
        ({"embedding_config": {"embedding_endpoint_type": "openai", "embedding_model": "mystery"}}, 400, "'openai/mystery'"),
    ],
)
async def test_create_agent_bad_input_is_refused_and_stores_nothing(client, db, body, status, fragment):
    before = await table_counts(db)

    response = await client.post("/v1/agents/", json=body)

    assert response.status_code == status, response.text
    assert fragment in response.json()["detail"]
    assert await table_counts(db) == before


async def test_malformed_json_body_is_400_not_500(client, db):
    before = await table_counts(db)

    response = await client.post("/v1/agents/", content=b"{not json", headers={"content-type": "application/json"})

    assert response.status_code == 400
    assert "not valid JSON" in response.json()["detail"] and "position" in response.json()["detail"]
    assert await table_counts(db) == before


async def test_get_agent_malformed_and_unknown_ids(client):
    malformed = await client.get("/v1/agents/agent-123")
    unknown = await client.get(f"/v1/agents/{UNKNOWN_AGENT}")

    assert malformed.status_code == 422
    assert "expected 'agent-<uuid4>'" in malformed.json()["detail"]
    assert unknown.status_code == 404
    assert UNKNOWN_AGENT in unknown.json()["detail"]


async def test_v1_sdk_clients_get_relations_only_when_included(client):
    agent = await create_agent(client, tags=["t"])
    sdk = {"X-Stainless-Package-Version": "1.12.1"}

    bare = (await client.get(f"/v1/agents/{agent['id']}", headers=sdk)).json()
    included = (
        await client.get(
            f"/v1/agents/{agent['id']}", headers=sdk, params=[("include", "agent.blocks"), ("include", "agent.tags")]
        )
    ).json()
    plain = (await client.get(f"/v1/agents/{agent['id']}")).json()
    with_blocks = (await client.get(f"/v1/agents/{agent['id']}", headers=sdk, params={"include": "agent.blocks"})).json()

    assert bare["blocks"] == [] and bare["tags"] == [] and bare["memory"]["blocks"] == []
    assert with_blocks["tags"] == ["t"] and with_blocks["tools"] == []  # Letta loads the tags with the blocks
    assert [b["label"] for b in included["blocks"]] == ["human", "persona"] and included["tags"] == ["t"]
    assert len(plain["blocks"]) == 2 and plain["tags"] == ["t"]


async def test_list_agents_paginates_with_cursors_and_ends_with_empty_page(client):
    ids = [(await create_agent(client, name=f"agent {i}"))["id"] for i in range(5)]

    first = (await client.get("/v1/agents/", params={"limit": 2})).json()
    second = (await client.get("/v1/agents/", params={"limit": 2, "after": first[-1]["id"]})).json()
    third = (await client.get("/v1/agents/", params={"limit": 2, "after": second[-1]["id"]})).json()
    past_end = (await client.get("/v1/agents/", params={"limit": 2, "after": third[-1]["id"]})).json()
    ascending = (await client.get("/v1/agents/", params={"order": "asc", "limit": 10})).json()
    before = (await client.get("/v1/agents/", params={"order": "asc", "before": ids[3], "limit": 2})).json()

    newest_first = list(reversed(ids))
    assert [a["id"] for a in first + second + third] == newest_first
    assert past_end == []
    assert [a["id"] for a in ascending] == ids
    assert [a["id"] for a in before] == ids[1:3]


async def test_list_agents_filters_by_name_and_tags(client):
    await create_agent(client, name="alpha", tags=["red", "big"])
    await create_agent(client, name="beta", tags=["red"])
    await create_agent(client, name="gamma", tags=["blue"])

    by_name = (await client.get("/v1/agents/", params={"name": "beta"})).json()
    any_tag = (await client.get("/v1/agents/", params=[("tags", "big"), ("tags", "blue")])).json()
    all_tags = (await client.get("/v1/agents/", params=[("tags", "red"), ("tags", "big"), ("match_all_tags", "true")])).json()

    assert [a["name"] for a in by_name] == ["beta"]
    assert sorted(a["name"] for a in any_tag) == ["alpha", "gamma"]
    assert [a["name"] for a in all_tags] == ["alpha"]


async def test_list_agents_unknown_cursor_is_404(client):
    response = await client.get("/v1/agents/", params={"after": UNKNOWN_AGENT})

    assert response.status_code == 404
    assert "Cursor after=" in response.json()["detail"]


async def test_patch_agent_system_and_render_mode_recompile_the_prompt(client):
    agent = await create_agent(client)

    patched = await client.patch(
        f"/v1/agents/{agent['id']}", json={"system": "New rules.", "memory_render_mode": "line_numbered"}
    )

    assert patched.status_code == 200
    prompt = await compiled_prompt(client, agent["id"])
    assert prompt.startswith("New rules.\n\n<memory_blocks>")
    assert "1→ Name: Bob" in prompt and "<warning>" in prompt


async def test_patch_agent_block_ids_replaces_attachments(client):
    agent = await create_agent(client)
    notes = await create_block(client)
    keep = agent["blocks"][0]["id"]

    patched = await client.patch(f"/v1/agents/{agent['id']}", json={"block_ids": [keep, notes["id"]]})

    assert [b["label"] for b in patched.json()["blocks"]] == ["human", "notes"]
    prompt = await compiled_prompt(client, agent["id"])
    assert "<notes>" in prompt and "<persona>" not in prompt


async def test_patch_agent_bad_timezone_changes_nothing(client):
    agent = await create_agent(client, timezone="Europe/Berlin")

    response = await client.patch(f"/v1/agents/{agent['id']}", json={"timezone": "Nowhere/Land", "name": "renamed"})

    assert response.status_code == 422
    current = (await client.get(f"/v1/agents/{agent['id']}")).json()
    assert current["timezone"] == "Europe/Berlin" and current["name"] == agent["name"]


async def test_patch_agent_to_an_embedding_model_of_unknown_size_changes_nothing(client):
    agent = await create_agent(client)

    response = await client.patch(f"/v1/agents/{agent['id']}", json={"embedding": "openai/mystery", "name": "renamed"})

    assert response.status_code == 400 and "MEMVM_EMBEDDING_DIM" in response.json()["detail"]
    current = (await client.get(f"/v1/agents/{agent['id']}")).json()
    assert current["embedding"] == agent["embedding"] and current["name"] == agent["name"]


async def test_message_buffer_autoclear_round_trips_and_defaults_to_false(client, db):
    plain = await create_agent(client)
    clearing = await create_agent(client, message_buffer_autoclear=True)
    workflow = await create_agent(client, agent_type="workflow_agent")

    turned_off = await client.patch(f"/v1/agents/{clearing['id']}", json={"message_buffer_autoclear": False})
    turned_on = await client.patch(f"/v1/agents/{plain['id']}", json={"message_buffer_autoclear": True})
    untouched = await client.patch(f"/v1/agents/{plain['id']}", json={"name": "renamed"})
    bad = await client.patch(f"/v1/agents/{plain['id']}", json={"message_buffer_autoclear": "sometimes"})

    assert plain["message_buffer_autoclear"] is False and clearing["message_buffer_autoclear"] is True
    assert workflow["message_buffer_autoclear"] is True  # Letta forces it on for workflow agents
    assert turned_off.json()["message_buffer_autoclear"] is False and turned_on.json()["message_buffer_autoclear"] is True
    assert untouched.json()["message_buffer_autoclear"] is True and bad.status_code == 422
    read = {a["id"]: a["message_buffer_autoclear"] for a in (await client.get("/v1/agents/")).json()}
    assert read == {plain["id"]: True, clearing["id"]: False, workflow["id"]: True}
    assert (await client.get(f"/v1/agents/{plain['id']}")).json()["message_buffer_autoclear"] is True
    stored = dict(await db.fetch("SELECT id, message_buffer_autoclear FROM agent"))
    assert stored == read


async def test_delete_agent_keeps_its_blocks(client):
    agent = await create_agent(client)

    deleted = await client.delete(f"/v1/agents/{agent['id']}")

    assert deleted.status_code == 200
    assert (await client.get(f"/v1/agents/{agent['id']}")).status_code == 404
    block = await client.get(f"/v1/blocks/{agent['blocks'][0]['id']}")
    assert block.status_code == 200
    assert (await client.delete(f"/v1/agents/{agent['id']}")).status_code == 404


async def test_metadata_timestamp_uses_agent_timezone(client):
    agent = await create_agent(client, timezone="Asia/Tokyo")

    prompt = await compiled_prompt(client, agent["id"])

    assert "JST+0900" in prompt
    assert "0 previous messages between you and the user are stored in recall memory" in prompt
    assert "archival memory" not in prompt


async def test_recompile_dry_run_does_not_store(client, db):
    agent = await create_agent(client)
    stored_before = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])

    preview = await client.post(f"/v1/agents/{agent['id']}/recompile", params={"dry_run": "true", "update_timestamp": "true"})
    stored_after = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])
    recompiled = await client.post(f"/v1/agents/{agent['id']}/recompile", params={"update_timestamp": "true"})

    assert preview.status_code == 200
    assert stored_after == stored_before
    assert recompiled.json() == await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])


async def test_many_blocks_and_tools_keep_the_order_given(client):
    """Blocks and tools are attached in one multi-row INSERT each; their order is the order given, not
    the alphabet or the ids'."""
    labels = ["zeta", "alpha", "mid", "beta", "omega", "delta", "kappa", "eta"]
    existing = [await create_block(client, label=label, value=label) for label in ("zz-shared", "aa-shared")]
    tools = ["memory_replace", "conversation_search", "archival_memory_search", "memory_insert", "archival_memory_insert"]
    agent = await create_agent(
        client,
        memory_blocks=[{"label": label, "value": label} for label in labels],
        block_ids=[block["id"] for block in existing],
        tools=tools,
        include_base_tools=False,
    )

    assert [b["label"] for b in agent["blocks"]] == [*labels, "zz-shared", "aa-shared"]
    assert [t["name"] for t in agent["tools"]] == tools
    prompt = await compiled_prompt(client, agent["id"])
    assert [prompt.index(f"<{label}>") for label in labels] == sorted(prompt.index(f"<{label}>") for label in labels)
