"""POST /v1/agents/{id}/tools/{name}/run: one of the agent's attached tools run by the client with
its arguments, through the code a turn runs the model's calls with: built-ins on the agent's memory,
custom tools in the sandbox with the agent's secrets. Nothing is added to the conversation."""

import pytest

from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}
READ_SECRET = '''
def token(name: str) -> str:
    """Read a variable of my environment.

    Args:
        name: The variable.
    """
    import os
    print("reading", name)
    return os.environ.get(name, "<unset>")
'''


def run_url(agent_id: str, tool_name: str) -> str:
    return f"/v1/agents/{agent_id}/tools/{tool_name}/run"


async def test_a_built_in_edits_the_agent_s_memory_as_its_call_would(client):
    agent = await create_agent(client, **MODEL, tools=["memory_insert"])

    response = await client.post(
        run_url(agent["id"], "memory_insert"), json={"args": {"label": "human", "new_string": "Likes tea"}}
    )

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "success" and response.json()["stdout"] is None
    block = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert "Likes tea" in block["value"]
    [newest, *_] = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human/history")).json()
    assert newest["actor"]["type"] == "local" and newest["actor"]["tool_call_id"].startswith("toolcall-")
    assert (await client.get(f"/v1/agents/{agent['id']}/messages")).json() == []


async def test_bad_arguments_are_an_error_result_and_change_nothing(client):
    agent = await create_agent(client, **MODEL, tools=["memory_insert"])

    wrong_name = (await client.post(run_url(agent["id"], "memory_insert"), json={"args": {"label": "human", "text": "x"}})).json()
    no_block = (
        await client.post(run_url(agent["id"], "memory_insert"), json={"args": {"label": "nope", "new_string": "x"}})
    ).json()

    assert wrong_name["status"] == "error" and "new_string" in wrong_name["func_return"]
    assert no_block["status"] == "error" and "nope" in no_block["func_return"]
    block = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert block["value"] == "Name: Bob" and block["version"] == 1


async def test_a_custom_tool_runs_in_the_sandbox_with_the_agent_s_secrets(client):
    tool = (await client.post("/v1/tools/", json={"source_code": READ_SECRET})).json()
    agent = await create_agent(client, **MODEL, tools=[tool["name"]], secrets={"WEATHER_TOKEN": "s3cr3t"})

    response = await client.post(run_url(agent["id"], "token"), json={"args": {"name": "WEATHER_TOKEN"}})
    missing = await client.post(run_url(agent["id"], "token"), json={"args": {}})

    assert response.json() == {
        "status": "success",
        "func_return": "s3cr3t",
        "stdout": ["reading WEATHER_TOKEN\n"],
        "stderr": None,
    }
    assert missing.json()["status"] == "error" and "name" in missing.json()["func_return"]


async def test_a_tool_that_is_not_attached_or_an_unknown_agent_is_a_404(client):
    agent = await create_agent(client, **MODEL, tools=["memory_insert"])
    unknown_agent = "agent-00000000-0000-4000-8000-000000000000"

    not_attached = await client.post(run_url(agent["id"], "archival_memory_insert"), json={"args": {"content": "x"}})
    no_agent = await client.post(run_url(unknown_agent, "memory_insert"), json={})

    assert not_attached.status_code == 404 and "not attached" in not_attached.json()["detail"]
    assert no_agent.status_code == 404


@pytest.mark.parametrize("body", [{"args": "label=human"}, {"args": {}, "agent_id": "x"}, [1]])
async def test_a_malformed_body_is_a_422(client, body):
    agent = await create_agent(client, **MODEL, tools=["memory_insert"])

    response = await client.post(run_url(agent["id"], "memory_insert"), json=body)

    assert response.status_code == 422 and "body" in response.json()["detail"]


async def test_another_organization_s_agent_is_a_404(keyed):
    client, (a, b) = keyed
    fields = {**MODEL, "tools": ["memory_insert"], "memory_blocks": [{"label": "human", "value": "Ana"}]}
    agent = (await client.post("/v1/agents/", json=fields, headers=a)).json()

    edit = {"args": {"label": "human", "new_string": "b was here"}}
    response = await client.post(run_url(agent["id"], "memory_insert"), json=edit, headers=b)

    assert response.status_code == 404
    block = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human", headers=a)).json()
    assert block["value"] == "Ana"
