"""Approvals and client-side tools through the step loop: a call that needs approval (rule, tool
default, or the approval toggle) or a call to a client tool stops the turn with requires_approval
and runs nothing; the client's answer runs it (or tells the model it was denied, or hands over the
client's result) and the loop goes on. The wait lives in PostgreSQL: a new server answers it."""

import json

import pytest

from tests.support.api import app_client, create_agent
from tests.support.sse import parse_sse

MODEL = {"model": "openai/scripted-model"}
DELETE_FILES = '''
def delete_files(pattern: str) -> str:
    """Delete files matching a pattern."""
    return f"deleted {pattern}"
'''


async def approval_agent(client, **fields) -> dict:
    tool = await client.post("/v1/tools/", json={"source_code": DELETE_FILES, **fields.pop("tool_fields", {})})
    assert tool.status_code == 200, tool.text
    return await create_agent(client, **MODEL, tools=["delete_files"], **fields)


async def send(client, agent_id: str, body: dict) -> dict:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def kinds(body: dict) -> list[str]:
    return [m["message_type"] for m in body["messages"]]


def approve(call_id: str, approve: bool = True, reason: str | None = None) -> dict:
    return {
        "messages": [
            {
                "type": "approval",
                "approvals": [{"type": "approval", "tool_call_id": call_id, "approve": approve, "reason": reason}],
            }
        ]
    }


async def stop_for_approval(client, llm, agent_id: str) -> dict:
    llm.reply(tool_calls=[("delete_files", {"pattern": "*.log"})])
    body = await send(client, agent_id, {"input": "clean up"})
    assert body["stop_reason"]["stop_reason"] == "requires_approval", body
    [request] = [m for m in body["messages"] if m["message_type"] == "approval_request_message"]
    assert "tool_return_message" not in kinds(body)
    return request


async def test_a_rule_stops_the_turn_and_an_approval_runs_the_tool_and_goes_on(client, llm):
    agent = await approval_agent(client, tool_rules=[{"type": "requires_approval", "tool_name": "delete_files"}])
    request = await stop_for_approval(client, llm, agent["id"])
    call_id = request["tool_call"]["tool_call_id"]
    llm.reply("Cleaned up.")

    body = await send(client, agent["id"], approve(call_id))

    assert request["tool_call"]["name"] == "delete_files" and json.loads(request["tool_call"]["arguments"]) == {
        "pattern": "*.log"
    }
    assert kinds(body) == ["approval_response_message", "tool_return_message", "assistant_message"]
    assert body["messages"][1]["tool_return"] == "deleted *.log" and body["messages"][1]["status"] == "success"
    assert body["stop_reason"]["stop_reason"] == "end_turn" and len(llm.requests) == 2
    tool_message = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert tool_message["tool_call_id"] == call_id and "deleted *.log" in tool_message["content"]
    history = kinds({"messages": (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc"})).json()})
    assert "approval_request_message" in history and "approval_response_message" in history


async def test_a_denial_tells_the_model_why_and_nothing_runs(client, llm):
    agent = await approval_agent(client, tool_fields={"default_requires_approval": True})
    request = await stop_for_approval(client, llm, agent["id"])
    llm.reply("Understood, I will not delete anything.")

    body = await send(client, agent["id"], approve(request["tool_call"]["tool_call_id"], False, "keep the logs"))

    [returned] = [m for m in body["messages"] if m["message_type"] == "tool_return_message"]
    assert (
        returned["status"] == "error"
        and returned["tool_return"] == "Error: request to call tool denied. User reason: keep the logs"
    )
    assert "denied" in [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert body["stop_reason"]["stop_reason"] == "end_turn"


async def test_a_new_message_while_waiting_is_a_409_that_names_the_wait(client, llm):
    agent = await approval_agent(client, tool_rules=[{"type": "requires_approval", "tool_name": "delete_files"}])
    request = await stop_for_approval(client, llm, agent["id"])

    refused = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hello?"})
    unknown = await client.post(f"/v1/agents/{agent['id']}/messages", json=approve("call-unknown"))

    assert refused.status_code == 409 and request["tool_call"]["tool_call_id"] in refused.json()["detail"]
    assert "delete_files" in refused.json()["detail"] and '"type": "approval"' in refused.json()["detail"]
    assert unknown.status_code == 400 and "unknown tool call id(s) call-unknown" in unknown.json()["detail"]
    assert len(llm.requests) == 1


async def test_an_approval_with_nothing_waiting_is_a_400(client, llm):
    agent = await approval_agent(client)

    refused = await client.post(f"/v1/agents/{agent['id']}/messages", json=approve("call-1"))

    assert refused.status_code == 400 and "not waiting for an approval" in refused.json()["detail"]


async def test_the_approval_toggle_adds_and_removes_the_rule(client, llm):
    agent = await approval_agent(client)

    on = await client.patch(f"/v1/agents/{agent['id']}/tools/approval/delete_files", json={"requires_approval": True})
    request = await stop_for_approval(client, llm, agent["id"])
    llm.reply("ok")
    await send(client, agent["id"], approve(request["tool_call"]["tool_call_id"]))
    off = await client.patch(f"/v1/agents/{agent['id']}/tools/approval/delete_files", json={"requires_approval": False})
    llm.reply(tool_calls=[("delete_files", {"pattern": "*.tmp"})]).reply("done")
    direct = await send(client, agent["id"], {"input": "again"})

    assert on.json()["tool_rules"] == [{"type": "requires_approval", "tool_name": "delete_files"}]
    assert off.json()["tool_rules"] == []
    assert direct["stop_reason"]["stop_reason"] == "end_turn" and "tool_return_message" in kinds(direct)


async def test_a_client_tool_call_waits_for_the_clients_result(client, llm):
    agent = await create_agent(client, **MODEL)
    weather = {"name": "get_location", "description": "Where the user is.", "parameters": {"type": "object", "properties": {}}}
    llm.reply(tool_calls=[("get_location", {})])

    stopped = await send(client, agent["id"], {"input": "where am I?", "client_tools": [weather]})
    [request] = [m for m in stopped["messages"] if m["message_type"] == "approval_request_message"]
    call_id = request["tool_call"]["tool_call_id"]
    approved_blindly = await client.post(f"/v1/agents/{agent['id']}/messages", json=approve(call_id))
    llm.reply("You are in Lisbon.")
    result = {"type": "tool", "tool_call_id": call_id, "tool_return": "Lisbon, PT", "status": "success"}
    body = await send(client, agent["id"], {"messages": [{"type": "approval", "approvals": [result]}], "client_tools": [weather]})

    assert "get_location" in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert stopped["stop_reason"]["stop_reason"] == "requires_approval"
    assert approved_blindly.status_code == 400 and "client-side tool" in approved_blindly.json()["detail"]
    [returned] = [m for m in body["messages"] if m["message_type"] == "tool_return_message"]
    assert returned["tool_return"] == "Lisbon, PT" and body["stop_reason"]["stop_reason"] == "end_turn"
    assert "Lisbon, PT" in [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]


@pytest.mark.parametrize("approved", [True, False])
async def test_approve_and_deny_over_stream(client, llm, approved):
    agent = await approval_agent(client, tool_rules=[{"type": "requires_approval", "tool_name": "delete_files"}])
    llm.reply(tool_calls=[("delete_files", {"pattern": "*.log"})])
    first = await client.post(f"/v1/agents/{agent['id']}/messages/stream", json={"input": "clean up"})
    stopped = parse_sse(first.text)
    [request] = [e for e in stopped if e.get("message_type") == "approval_request_message"]
    llm.reply("Done.")

    answer = approve(request["tool_call"]["tool_call_id"], approved, None if approved else "no")
    events = parse_sse((await client.post(f"/v1/agents/{agent['id']}/messages/stream", json=answer)).text)

    assert [e["stop_reason"] for e in stopped if e.get("message_type") == "stop_reason"] == ["requires_approval"]
    types = [e.get("message_type") for e in events]
    assert types.index("approval_response_message") < types.index("tool_return_message") < types.index("assistant_message")
    [returned] = [e for e in events if e.get("message_type") == "tool_return_message"]
    expected = "deleted *.log" if approved else "Error: request to call tool denied. User reason: no"
    assert returned["tool_return"] == expected
    assert [e["stop_reason"] for e in events if e.get("message_type") == "stop_reason"] == ["end_turn"]


async def test_the_wait_survives_a_restart(settings, llm):
    async with app_client(settings) as before:
        agent = await approval_agent(before, tool_rules=[{"type": "requires_approval", "tool_name": "delete_files"}])
        request = await stop_for_approval(before, llm, agent["id"])
    llm.reply("Cleaned up after the restart.")

    async with app_client(settings) as after:
        body = await send(after, agent["id"], approve(request["tool_call"]["tool_call_id"]))

    assert body["messages"][1]["tool_return"] == "deleted *.log"
    assert body["stop_reason"]["stop_reason"] == "end_turn"


async def test_reset_abandons_the_wait_and_compacting_waits_for_the_answer(client, llm):
    agent = await approval_agent(client, tool_rules=[{"type": "requires_approval", "tool_name": "delete_files"}])
    await stop_for_approval(client, llm, agent["id"])

    compacting = await client.post(f"/v1/agents/{agent['id']}/summarize")
    reset = await client.patch(f"/v1/agents/{agent['id']}/reset-messages")
    llm.reply("Hello again.")
    after = await send(client, agent["id"], {"input": "hello"})

    assert compacting.status_code == 409 and "waiting for an answer" in compacting.json()["detail"]
    assert reset.status_code == 200 and after["stop_reason"]["stop_reason"] == "end_turn"
