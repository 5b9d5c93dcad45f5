"""Custom tools called by an agent through the step loop: each call runs in the sandbox, its value,
stdout and stderr come back as the tool return, failures are results (the agent stays usable),
`agent_state` is a snapshot of the agent, and the agent's secrets reach its tools and nobody else."""

import json

from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}

ROLL = '''
def roll(sides: int, times: int = 1) -> dict:
    """Roll a die.

    Args:
        sides: Faces of the die.
        times: How many rolls.
    """
    import sys
    print(f"rolling d{sides} x{times}")
    print("careful", file=sys.stderr)
    return {"total": sides * times, "sides": sides}
'''
BROKEN = '''
def divide(a: int, b: int) -> float:
    """Divide."""
    return a / b
'''
READ_MEMORY = '''
def whoami(label: str, agent_state: "AgentState") -> str:
    """Read one of my own blocks."""
    block = agent_state.memory.get_block(label)
    return f"{agent_state.name}|{block.label}|{block.value}|{block.limit}"
'''
READ_SECRET = '''
def token(name: str) -> str:
    """Read a variable of my environment."""
    import os
    return os.environ.get(name, "<unset>")
'''


async def agent_with(client, source: str, **fields) -> dict:
    tool = await client.post("/v1/tools/", json={"source_code": source})
    assert tool.status_code == 200, tool.text
    return await create_agent(client, **MODEL, tools=[tool.json()["name"]], **fields)


async def one_call(client, llm, agent_id: str, name: str, args: dict) -> tuple[dict, dict]:
    """The model calls the tool once, then answers. Returns the tool return and the response."""
    llm.reply(tool_calls=[(name, args)]).reply("done")
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": "go"}]})
    assert response.status_code == 200, response.text
    body = response.json()
    [returned] = [m for m in body["messages"] if m["message_type"] == "tool_return_message"]
    return returned, body


async def test_an_agent_calls_a_custom_tool_and_gets_its_value_stdout_and_stderr(client, llm):
    agent = await agent_with(client, ROLL)

    returned, body = await one_call(client, llm, agent["id"], "roll", {"sides": 6, "times": 3})

    assert returned["status"] == "success", returned["tool_return"]
    assert json.loads(returned["tool_return"]) == {"total": 18, "sides": 6}
    assert returned["stdout"] == ["rolling d6 x3\n"] and returned["stderr"] == ["careful\n"]
    assert returned["tool_returns"][0]["stdout"] == ["rolling d6 x3\n"]
    assert body["stop_reason"]["stop_reason"] == "end_turn"
    offered = [tool["function"]["name"] for tool in llm.requests[0]["tools"]]
    assert "roll" in offered
    [spec] = [tool["function"] for tool in llm.requests[0]["tools"] if tool["function"]["name"] == "roll"]
    assert spec["parameters"]["required"] == ["sides"]
    tool_message = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert "18" in tool_message["content"]
    history = (await client.get(f"/v1/agents/{agent['id']}/messages")).json()
    [stored] = [m for m in history if m["message_type"] == "tool_return_message"]
    assert stored["stdout"] == ["rolling d6 x3\n"]


async def test_an_exception_is_an_error_result_and_the_agent_stays_usable(client, llm):
    agent = await agent_with(client, BROKEN)

    failed, _ = await one_call(client, llm, agent["id"], "divide", {"a": 1, "b": 0})
    succeeded, _ = await one_call(client, llm, agent["id"], "divide", {"a": 6, "b": 3})

    assert failed["status"] == "error" and "ZeroDivisionError: division by zero" in failed["tool_return"]
    assert "Traceback" in failed["stderr"][0]
    assert succeeded["status"] == "success" and succeeded["tool_return"] == "2.0"


async def test_bad_arguments_are_refused_before_anything_runs(client, llm):
    agent = await agent_with(client, ROLL)

    returned, _ = await one_call(client, llm, agent["id"], "roll", {"faces": 6})

    assert returned["status"] == "error"
    assert (
        "unknown argument(s) faces" in returned["tool_return"] and "missing required argument(s) sides" in returned["tool_return"]
    )
    assert returned["stdout"] is None


async def test_agent_state_is_a_snapshot_of_the_agent_with_its_memory(client, llm):
    agent = await agent_with(
        client, READ_MEMORY, name="ada", memory_blocks=[{"label": "human", "value": "Likes tea.", "limit": 500}]
    )

    returned, _ = await one_call(client, llm, agent["id"], "whoami", {"label": "human"})
    missing, _ = await one_call(client, llm, agent["id"], "whoami", {"label": "nope"})

    assert returned["tool_return"] == "ada|human|Likes tea.|500"
    assert missing["status"] == "error" and "Block 'nope' is not in this agent's memory" in missing["tool_return"]


async def test_secrets_reach_the_agents_tools_and_are_never_shown(client, llm):
    agent = await agent_with(client, READ_SECRET, secrets={"WEATHER_TOKEN": "s3cr3t-value"})
    other = await create_agent(client, **MODEL, tools=["token"])

    mine, _ = await one_call(client, llm, agent["id"], "token", {"name": "WEATHER_TOKEN"})
    theirs, _ = await one_call(client, llm, other["id"], "token", {"name": "WEATHER_TOKEN"})
    server_env, _ = await one_call(client, llm, agent["id"], "token", {"name": "MEMVM_DATABASE_URL"})

    assert mine["tool_return"] == "s3cr3t-value" and theirs["tool_return"] == "<unset>"
    assert server_env["tool_return"] == "<unset>"
    for path in (f"/v1/agents/{agent['id']}", "/v1/agents/", f"/v1/agents/{agent['id']}?include=agent.secrets"):
        shown = await client.get(path)
        assert shown.status_code == 200 and "s3cr3t-value" not in shown.text
    listed = (await client.get(f"/v1/agents/{agent['id']}", params={"include": "agent.secrets"})).json()
    assert [secret["key"] for secret in listed["secrets"]] == ["WEATHER_TOKEN"]
