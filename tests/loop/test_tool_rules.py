"""Every tool rule type through the step loop: what the model is offered at each step (read from
the requests memvm sent it), when the turn stops and with which reason, and what a call to a tool
that was not offered gets. Tools are small custom tools, so outputs are under the test's control."""

import pytest

from tests.support.api import create_agent

SOURCES = {
    "step_a": 'def step_a(n: int = 1) -> int:\n    """A."""\n    return n\n',
    "step_b": 'def step_b() -> str:\n    """B."""\n    return "b"\n',
    "check": 'def check(flag: str) -> str:\n    """Echo the flag."""\n    return flag\n',
    "finish": 'def finish() -> str:\n    """Done."""\n    return "finished"\n',
}


async def rules_agent(client, rules: list[dict], **fields) -> dict:
    for source in SOURCES.values():
        created = await client.post("/v1/tools/", json={"source_code": source})
        assert created.status_code == 200, created.text
    return await create_agent(
        client, model="openai/scripted-model", include_base_tools=False, tools=list(SOURCES), tool_rules=rules, **fields
    )


async def send(client, agent_id: str, **extra) -> dict:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": "go", **extra})
    assert response.status_code == 200, response.text
    return response.json()


def offered(request: dict) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or ()]


def stop_of(body: dict) -> str:
    return body["stop_reason"]["stop_reason"]


def returns_of(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m["message_type"] == "tool_return_message"]


async def test_run_first_offers_only_its_tool_on_the_first_step_and_fixes_its_args(client, llm):
    agent = await rules_agent(client, [{"type": "run_first", "tool_name": "step_a", "args": {"n": 7}}])
    llm.reply(tool_calls=[("step_a", {"n": 1})]).reply("ok")

    body = await send(client, agent["id"])

    assert offered(llm.requests[0]) == ["step_a"] and offered(llm.requests[1]) == list(SOURCES)
    assert returns_of(body)[0]["tool_return"] == "7"


async def test_exit_loop_ends_the_turn_with_tool_rule(client, llm):
    agent = await rules_agent(client, [{"type": "exit_loop", "tool_name": "finish"}])
    llm.reply(tool_calls=[("finish", {})])

    body = await send(client, agent["id"])

    assert stop_of(body) == "tool_rule" and len(llm.requests) == 1
    assert returns_of(body)[0]["tool_return"] == "finished"


async def test_continue_loop_keeps_a_terminal_builtin_going(client, llm):
    agent = await create_agent(
        client,
        model="openai/scripted-model",
        agent_type="memgpt_v2_agent",
        tool_rules=[{"type": "continue_loop", "tool_name": "send_message"}],
    )
    llm.reply(tool_calls=[("send_message", {"message": "one", "request_heartbeat": False})])
    llm.reply(tool_calls=[("send_message", {"message": "two", "request_heartbeat": False})])

    body = await send(client, agent["id"], max_steps=2)

    assert stop_of(body) == "max_steps" and len(llm.requests) == 2


async def test_without_continue_loop_send_message_ends_the_turn(client, llm):
    agent = await create_agent(client, model="openai/scripted-model", agent_type="memgpt_v2_agent")
    llm.reply(tool_calls=[("send_message", {"message": "one", "request_heartbeat": False})])

    body = await send(client, agent["id"], max_steps=2)

    assert stop_of(body) == "end_turn" and len(llm.requests) == 1


async def test_constrain_child_tools_offers_only_the_children_next(client, llm):
    agent = await rules_agent(client, [{"type": "constrain_child_tools", "tool_name": "step_a", "children": ["step_b"]}])
    llm.reply(tool_calls=[("step_a", {})]).reply(tool_calls=[("step_b", {})]).reply("ok")

    await send(client, agent["id"])

    assert [offered(request) for request in llm.requests] == [list(SOURCES), ["step_b"], list(SOURCES)]


@pytest.mark.parametrize(("flag", "next_tools"), [("yes", ["step_a"]), ("no", ["step_b"]), ("maybe", ["finish"])])
async def test_conditional_picks_the_next_tool_from_the_output(client, llm, flag, next_tools):
    rule = {
        "type": "conditional",
        "tool_name": "check",
        "child_output_mapping": {"yes": "step_a", "no": "step_b"},
        "default_child": "finish",
    }
    agent = await rules_agent(client, [rule])
    llm.reply(tool_calls=[("check", {"flag": flag})]).reply("ok")

    await send(client, agent["id"])

    assert offered(llm.requests[1]) == next_tools


async def test_parent_last_tool_offers_children_only_right_after_the_parent(client, llm):
    agent = await rules_agent(client, [{"type": "parent_last_tool", "tool_name": "step_a", "children": ["step_b"]}])
    llm.reply(tool_calls=[("step_a", {})]).reply(tool_calls=[("check", {"flag": "x"})]).reply("ok")

    await send(client, agent["id"])

    assert "step_b" not in offered(llm.requests[0]) and "step_b" in offered(llm.requests[1])
    assert "step_b" not in offered(llm.requests[2])


async def test_max_count_per_step_stops_offering_the_tool(client, llm):
    agent = await rules_agent(client, [{"type": "max_count_per_step", "tool_name": "step_a", "max_count_limit": 2}])
    llm.reply(tool_calls=[("step_a", {}), ("step_a", {})]).reply("ok")

    await send(client, agent["id"])

    assert "step_a" in offered(llm.requests[0]) and "step_a" not in offered(llm.requests[1])


async def test_required_before_exit_keeps_the_turn_going_until_called(client, llm):
    agent = await rules_agent(client, [{"type": "required_before_exit", "tool_name": "finish"}])
    llm.reply("I am done.").reply(tool_calls=[("finish", {})]).reply("Now I am done.")

    body = await send(client, agent["id"])

    assert stop_of(body) == "end_turn" and len(llm.requests) == 3
    nudge = llm.requests[1]["messages"][-1]
    assert nudge["role"] == "user" and "ToolRuleViolated: You must call finish at least once" in nudge["content"]


async def test_a_call_to_a_tool_not_offered_is_an_error_result_not_a_crash(client, llm):
    agent = await rules_agent(client, [{"type": "run_first", "tool_name": "step_a"}])
    llm.reply(tool_calls=[("step_b", {})]).reply("ok")

    body = await send(client, agent["id"])

    [returned] = returns_of(body)
    assert returned["status"] == "error" and "'step_b' is not available now" in returned["tool_return"]
    assert "step_a" in returned["tool_return"] and stop_of(body) == "end_turn"


async def test_rules_are_stored_returned_replaced_and_checked(client):
    agent = await rules_agent(client, [{"type": "exit_loop", "tool_name": "finish"}])
    limit_one = {"type": "max_count_per_step", "tool_name": "step_a", "max_count_limit": 1}

    async def set_rules(*rules: dict):
        return await client.patch(f"/v1/agents/{agent['id']}", json={"tool_rules": list(rules)})

    replaced = await set_rules(limit_one)
    unknown_tool = await set_rules({"type": "exit_loop", "tool_name": "no_such_tool"})
    bad_type = await set_rules({"type": "sometimes", "tool_name": "step_a"})
    bad_limit = await set_rules({**limit_one, "max_count_limit": 0})

    assert agent["tool_rules"] == [{"type": "exit_loop", "tool_name": "finish"}]
    assert replaced.status_code == 200 and replaced.json()["tool_rules"] == [limit_one]
    assert unknown_tool.status_code == 400 and "no_such_tool" in unknown_tool.json()["detail"]
    assert bad_type.status_code == 422 and bad_limit.status_code == 422
    assert (await client.get(f"/v1/agents/{agent['id']}")).json()["tool_rules"] == [limit_one]
