"""The console's conversation: a message sent from the page runs as a background run whose stored
events stream back as HTML over SSE; the timeline groups messages by run and step; a pending
approval is answered from the page; cancel stops a running turn."""

import asyncio
import re

from tests.support.api import create_agent
from tests.support.console import form_headers, sign_in

MODEL = {"model": "openai/scripted-model"}


def sse_frames(text: str) -> list[tuple[str, str]]:
    """(event name, data) of each frame; multi-line data joined as EventSource joins it."""
    frames = []
    for frame in text.strip().split("\n\n"):
        lines = frame.splitlines()
        name = next((line[len("event: ") :] for line in lines if line.startswith("event: ")), "message")
        data = "\n".join(line[len("data: ") :] for line in lines if line.startswith("data: "))
        frames.append((name, data))
    return frames


async def send_from_console(client, agent_id: str, token: str, text: str) -> list[tuple[str, str]]:
    live = await client.post(f"/ui/agents/{agent_id}/messages", data={"text": text}, headers=form_headers(token))
    assert live.status_code == 200, live.text
    assert text in live.text  # shown at once, before the reply
    stream_url = re.search(r'sse-connect="([^"]+)"', live.text).group(1)
    streamed = await client.get(stream_url)
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    return sse_frames(streamed.text)


async def test_a_message_streams_its_turn_with_the_tool_call_and_the_timeline_groups_it_by_run(client, llm):
    agent = await create_agent(client, **MODEL)
    token = await sign_in(client)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Loves green tea"})]).reply("Noted, Bob.")

    frames = await send_from_console(client, agent["id"], token, "I love green tea")
    timeline = await client.get(f"/ui/agents/{agent['id']}/timeline", params={"after_run": "true"})

    names = [name for name, _ in frames]
    text = "\n".join(data for _, data in frames)
    assert names[-1] == "done" and "closing" in names
    assert "Tool call: <code>memory_insert</code>" in text and "I love green tea" in timeline.text
    assert "Loves green tea" in text and "Tool return: success" in text and "Noted, Bob." in text
    assert "Stopped: end_turn" in text
    assert timeline.headers["hx-trigger"] == "memory-changed, turn-ended"
    assert re.search(r"Run <code>run-[^<]+</code>: completed, stopped by end_turn", timeline.text)
    assert timeline.text.count('class="messages step"') == 2  # the tool step and the answer step
    human = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")
    assert "Loves green tea" in human.json()["value"]


async def test_a_pending_approval_is_answered_from_the_page_and_the_turn_goes_on(client, llm):
    agent = await create_agent(client, **MODEL)
    toggled = await client.patch(f"/v1/agents/{agent['id']}/tools/approval/memory_insert", json={"requires_approval": True})
    assert toggled.status_code == 200, toggled.text
    token = await sign_in(client)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Owns a cat"})])

    first = await send_from_console(client, agent["id"], token, "I have a cat")
    waiting = await client.get(f"/ui/agents/{agent['id']}/timeline")
    call_id = re.search(r'name="tool_call_id" value="([^"]+)"', waiting.text).group(1)
    llm.reply("Noted: a cat.")
    live = await client.post(
        f"/ui/agents/{agent['id']}/approvals", data={"tool_call_id": call_id, "decision": "approve"}, headers=form_headers(token)
    )
    second = sse_frames((await client.get(re.search(r'sse-connect="([^"]+)"', live.text).group(1))).text)
    after = await client.get(f"/ui/agents/{agent['id']}/timeline")

    assert "Stopped: requires_approval" in "\n".join(data for _, data in first)
    assert "Waiting for approval" in waiting.text and "Approve memory_insert" in waiting.text
    answered = "\n".join(data for _, data in second)
    assert "approved" in answered and "Tool return: success" in answered and "Noted: a cat." in answered
    assert "Waiting for approval" not in after.text
    human = await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")
    assert "Owns a cat" in human.json()["value"]


async def test_cancel_stops_a_running_turn(client, llm):
    agent = await create_agent(client, **MODEL)
    token = await sign_in(client)
    idle = await client.post(f"/ui/agents/{agent['id']}/cancel", headers=form_headers(token))
    llm.hang(10)

    live = await client.post(f"/ui/agents/{agent['id']}/messages", data={"text": "hello"}, headers=form_headers(token))
    run_id = re.search(r"runs/(run-[^/]+)/stream", live.text).group(1)
    for _ in range(250):  # until the turn is in its model call
        if (await client.get(f"/v1/runs/{run_id}")).json()["status"] == "running":
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"run {run_id} never started")
    cancelled = await client.post(f"/ui/agents/{agent['id']}/cancel", headers=form_headers(token))
    streamed = sse_frames((await client.get(f"/ui/agents/{agent['id']}/runs/{run_id}/stream")).text)

    assert "No run of this agent is active." in idle.text
    assert "Asked 1 run(s) to stop." in cancelled.text
    assert "Stopped: cancelled" in "\n".join(data for _, data in streamed)
    assert (await client.get(f"/v1/runs/{run_id}")).json()["status"] == "cancelled"


async def test_another_agents_run_is_not_streamed_under_this_agent(client, llm):
    first, second = await create_agent(client, **MODEL), await create_agent(client, **MODEL)
    token = await sign_in(client)
    llm.reply("hi")
    live = await client.post(f"/ui/agents/{first['id']}/messages", data={"text": "hello"}, headers=form_headers(token))
    run_id = re.search(r"runs/(run-[^/]+)/stream", live.text).group(1)

    wrong = await client.get(f"/ui/agents/{second['id']}/runs/{run_id}/stream")

    assert wrong.status_code == 404 and "is not a run of agent" in wrong.text


async def test_compact_now_summarizes_the_window_and_shows_the_new_breakdown(client, llm):
    agent = await create_agent(client, **MODEL)
    token = await sign_in(client)
    for text in ("hello", "I like tea"):
        llm.reply("ok")
        assert (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": text})).status_code == 200
    before = await client.get(f"/ui/agents/{agent['id']}/context")
    llm.reply("Bob said hello and likes tea.")

    compacted = await client.post(f"/ui/agents/{agent['id']}/compact", headers=form_headers(token))
    context = (await client.get(f"/v1/agents/{agent['id']}/context")).json()

    def tokens(page, part: str) -> int:
        return int(re.search(rf"</span> {part}</th><td>(\d+)</td>", page.text).group(1))

    assert compacted.status_code == 200
    assert "Compacted: 4 messages in the window before, 1 after." in compacted.text
    assert tokens(before, "messages") > 0 and tokens(compacted, "messages") == 0
    assert tokens(compacted, "summary") == context["num_tokens_summary_memory"] > 0
