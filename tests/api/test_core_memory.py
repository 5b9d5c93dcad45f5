from tests.support.api import compiled_prompt, create_agent, create_block, table_counts


async def test_list_and_retrieve_agent_blocks_by_label(client):
    agent = await create_agent(client)

    listed = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks")
    human = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")
    missing = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/boss")

    assert [b["label"] for b in listed.json()] == ["human", "persona"]
    assert human.json()["value"] == "Name: Bob" and human.headers["ETag"] == '"1"'
    assert missing.status_code == 404
    assert "No block with label 'boss'" in missing.json()["detail"] and "human, persona" in missing.json()["detail"]


async def test_agent_blocks_list_paginates_in_attachment_order(client):
    agent = await create_agent(client)
    ids = [b["id"] for b in agent["blocks"]]

    first = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks", params={"limit": 1})).json()
    rest = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks", params={"after": first[0]["id"]})).json()
    past_end = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks", params={"after": ids[-1]})).json()

    assert [b["id"] for b in first + rest] == ids
    assert past_end == []


async def test_patch_by_label_shows_new_value_in_every_view(client):
    agent = await create_agent(client)

    patched = await client.patch(
        f"/v1/agents/{agent['id']}/core-memory/blocks/human", json={"value": "Name: Bob Smith\nLikes: tea"}
    )

    assert patched.status_code == 200 and patched.json()["version"] == 2
    standard = await compiled_prompt(client, agent["id"])
    assert "Name: Bob Smith\nLikes: tea\n</value>" in standard and "chars_current=26" in standard
    await client.patch(f"/v1/agents/{agent['id']}", json={"memory_render_mode": "line_numbered"})
    numbered = await compiled_prompt(client, agent["id"])
    assert "1→ Name: Bob Smith\n2→ Likes: tea" in numbered and "chars_current=26" in numbered
    await client.patch(f"/v1/agents/{agent['id']}", json={"memory_render_mode": "git"})
    git = await compiled_prompt(client, agent["id"])
    assert "<projection>$MEMORY_DIR/system/human.md</projection>" in git and "  Likes: tea" in git
    assert "<projection>$MEMORY_DIR/system/persona.md</projection>\nI am Sam." in git


async def test_patch_by_label_respects_if_match_and_limit(client, db):
    agent = await create_agent(client, memory_blocks=[{"label": "human", "value": "Bob", "limit": 5}])
    before = await table_counts(db)

    over = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/human", json={"value": "Robert"})
    stale = await client.patch(
        f"/v1/agents/{agent['id']}/core-memory/blocks/human", json={"value": "Rob"}, headers={"If-Match": '"7"'}
    )

    assert over.status_code == 422 and "6 characters, over its limit of 5" in over.json()["detail"]
    assert stale.status_code == 412
    assert await table_counts(db) == before
    assert "Bob" in await compiled_prompt(client, agent["id"])


async def test_read_only_blocks_stay_editable_over_rest(client):
    agent = await create_agent(client, memory_blocks=[{"label": "policy", "value": "v1", "read_only": True}])

    response = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/policy", json={"value": "v2"})

    assert response.status_code == 200 and response.json()["value"] == "v2"
    assert "- read_only=true" in await compiled_prompt(client, agent["id"])


async def test_attach_and_detach_recompile_and_keep_the_block(client):
    agent = await create_agent(client)
    notes = await create_block(client, value="remember the milk")

    attached = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/attach/{notes['id']}")
    again = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/attach/{notes['id']}")
    prompt_with = await compiled_prompt(client, agent["id"])
    detached = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/detach/{notes['id']}")
    prompt_without = await compiled_prompt(client, agent["id"])

    assert attached.status_code == 200 and [b["label"] for b in attached.json()["blocks"]] == ["human", "persona", "notes"]
    assert again.status_code == 200 and len(again.json()["blocks"]) == 3
    assert "remember the milk" in prompt_with
    assert detached.status_code == 200 and len(detached.json()["blocks"]) == 2
    assert "remember the milk" not in prompt_without
    assert (await client.get(f"/v1/blocks/{notes['id']}")).status_code == 200


async def test_attach_with_clashing_label_is_409_naming_the_clash(client, db):
    agent = await create_agent(client)
    other_human = await create_block(client, label="human", value="someone else")
    before = await table_counts(db)

    response = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/attach/{other_human['id']}")

    assert response.status_code == 409
    detail = response.json()["detail"]
    assert "'human'" in detail and agent["blocks"][0]["id"] in detail and other_human["id"] in detail
    assert await table_counts(db) == before


async def test_detach_unattached_block_is_404(client):
    agent = await create_agent(client)
    loose = await create_block(client)

    response = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/detach/{loose['id']}")

    assert response.status_code == 404
    assert "not attached" in response.json()["detail"]


async def test_nested_labels_work_as_paths(client):
    agent = await create_agent(
        client, memory_blocks=[{"label": "system/project/notes", "value": "ship it"}], memory_render_mode="git"
    )

    block = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/system/project/notes")

    assert block.status_code == 200 and block.json()["value"] == "ship it"
    assert "<projection>$MEMORY_DIR/system/project/notes.md</projection>" in await compiled_prompt(client, agent["id"])


TIDE = '''
def tide(port: str) -> str:
    """Tell the next high tide.

    Args:
        port: Name of the port.
    """
    return f"High tide in {port} at noon"
'''


async def test_attach_and_detach_answer_the_tools_as_reading_the_agent_back_gives(client):
    # The write that links the block also reads the agent's tools: the organization's own and the
    # built-ins, in attachment order, and none for an agent without tools.
    tide = (await client.post("/v1/tools/", json={"source_code": TIDE})).json()
    with_tools = await create_agent(client, tools=["archival_memory_search"], tool_ids=[tide["id"]])
    without = await create_agent(client, include_base_tools=False)
    notes = await create_block(client, value="remember the milk")

    answered = {}
    for agent in (with_tools, without):
        url = f"/v1/agents/{agent['id']}/core-memory/blocks"
        attached = (await client.patch(f"{url}/attach/{notes['id']}")).json()
        after_attach = (await client.get(f"/v1/agents/{agent['id']}")).json()
        detached = (await client.patch(f"{url}/detach/{notes['id']}")).json()
        after_detach = (await client.get(f"/v1/agents/{agent['id']}")).json()
        assert attached == after_attach and detached == after_detach
        answered[agent["id"]] = ([t["name"] for t in attached["tools"]], [t["name"] for t in detached["tools"]])

    names = ["conversation_search", "memory_replace", "memory_insert", "archival_memory_search", "tide"]
    assert answered[with_tools["id"]] == (names, names)
    assert answered[without["id"]] == ([], [])
