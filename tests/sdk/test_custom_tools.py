"""Custom tools through the official SDK: create one from source, attach it, and an agent calls it
in the sandbox; the agent's secrets reach the tool and come back masked; a call that needs approval
waits for the SDK's answer."""

import asyncio
import json

from letta_client import AsyncLetta
from letta_client.types import ToolReturnMessage
from letta_client.types.agents import ApprovalRequestMessage, ApprovalResponseMessage

from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import new_agent

CONVERT = '''
def convert_temperature(celsius: float, to: str = "fahrenheit") -> dict:
    """Convert a temperature.

    Args:
        celsius: Degrees Celsius.
        to: fahrenheit or kelvin.
    """
    import os
    print("converting", celsius)
    value = celsius * 9 / 5 + 32 if to == "fahrenheit" else celsius + 273.15
    return {"value": value, "unit": to, "station": os.environ.get("STATION", "?")}
'''


async def test_the_sdk_creates_a_tool_attaches_it_and_an_agent_calls_it(letta: AsyncLetta, llm: ScriptedLLM):
    tool = await letta.tools.create(source_code=CONVERT, tags=["units"])
    agent = await new_agent(letta, secrets={"STATION": "north-7"})
    await letta.agents.tools.attach(tool.id, agent_id=agent.id)
    llm.reply(tool_calls=[("convert_temperature", {"celsius": 100})]).reply("212 °F.")

    response = await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "100 C in F?"}])
    shown = await letta.agents.retrieve(agent.id, include=["agent.secrets"])

    assert tool.name == "convert_temperature" and tool.tool_type == "custom"
    assert tool.json_schema["parameters"]["required"] == ["celsius"]
    [result] = [m for m in response.messages if isinstance(m, ToolReturnMessage)]
    assert result.status == "success", result.tool_return
    assert json.loads(result.tool_return) == {"value": 212.0, "unit": "fahrenheit", "station": "north-7"}
    assert result.stdout == ["converting 100\n"]
    assert [secret.key for secret in shown.secrets or []] == ["STATION"]
    assert all(secret.value != "north-7" for secret in shown.secrets or [])


async def test_the_sdk_toggles_approval_and_answers_a_waiting_call(letta: AsyncLetta, llm: ScriptedLLM):
    tool = await letta.tools.upsert(source_code=CONVERT)
    agent = await new_agent(letta, tool_ids=[tool.id])
    await letta.agents.tools.update_approval(tool.name, agent_id=agent.id, body_requires_approval=True)
    llm.reply(tool_calls=[("convert_temperature", {"celsius": 0, "to": "kelvin"})])

    stopped = await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "0 C in K?"}])
    [request] = [m for m in stopped.messages if isinstance(m, ApprovalRequestMessage)]
    llm.reply("273.15 K.")
    answer = {"type": "approval", "tool_call_id": request.tool_call.tool_call_id, "approve": True}
    answered = await letta.agents.messages.create(agent.id, messages=[{"type": "approval", "approvals": [answer]}])

    assert stopped.stop_reason.stop_reason == "requires_approval"
    assert isinstance(answered.messages[0], ApprovalResponseMessage)
    [result] = [m for m in answered.messages if isinstance(m, ToolReturnMessage)]
    assert json.loads(result.tool_return)["value"] == 273.15
    assert answered.stop_reason.stop_reason == "end_turn"


HUMIDITY = '''
def read_humidity(room: str) -> float:
    """Read the relative humidity of a room from its hygrometer.

    Args:
        room: Which room to measure.
    """
    return 0.4
'''


async def test_the_sdk_searches_tools_by_text_at_once_and_by_meaning_once_embedded(letta: AsyncLetta):
    tool = await letta.tools.create(source_code=HUMIDITY, tags=["sensors"])

    by_text = await letta.tools.search(query="hygrometer", search_mode="fts", tool_types=["custom"], tags=["sensors"])
    by_meaning = []
    for _ in range(150):  # the embedding worker (a process of its own) picks the new tool up within seconds
        by_meaning = await letta.tools.search(query="how damp is the air in the kitchen", search_mode="vector", limit=3)
        if any(hit.tool.id == tool.id for hit in by_meaning):
            break
        await asyncio.sleep(0.2)
    memory = await letta.tools.search(query="memory", search_mode="fts", tool_types=["letta_memory_core"])

    [hit] = by_text
    assert hit.tool.id == tool.id and hit.fts_rank == 1 and hit.vector_rank is None and hit.combined_score > 0
    assert "Tags: sensors" in (hit.embedded_text or "")
    assert by_meaning[0].tool.id == tool.id and by_meaning[0].vector_rank == 1
    assert memory and all(found.tool.tool_type == "letta_memory_core" for found in memory)
