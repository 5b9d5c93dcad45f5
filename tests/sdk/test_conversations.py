"""Conversations through the official SDK: every `letta.conversations` method against a live server.

Many threads of one agent share its memory blocks but keep their own history, window and runs. The
model is the module's ScriptedLLM; turns that must overlap are answered by `llm.respond`, keyed by
the turn's last user message, and held there with a delay.
"""

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest
from letta_client import APIStatusError, AsyncLetta, NotFoundError
from letta_client.types import ToolReturnMessage
from letta_client.types.agents import AssistantMessage

from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import MODEL, memory_value, new_agent, prompt_text

WAIT_SECONDS = 15.0


async def converse(letta: AsyncLetta, conversation_id: str, text: str, **fields) -> list:
    """One turn in the conversation, its streamed events collected."""
    return [event async for event in await letta.conversations.messages.create(conversation_id, input=text, **fields)]


async def history(letta: AsyncLetta, conversation_id: str, **params) -> list:
    return [message async for message in letta.conversations.messages.list(conversation_id, order="asc", **params)]


def said(messages: list, kind: str) -> list[str]:
    """The text of the listed messages of one kind (`user_message`, `assistant_message`)."""
    return [m.content for m in messages if m.message_type == kind]


def last_user_text(body: dict) -> str:
    return [m["content"] for m in body["messages"] if m["role"] == "user"][-1]


def system_prompt_of(body: dict) -> str:
    assert body["messages"][0]["role"] == "system"
    return body["messages"][0]["content"]


def requests_for(llm: ScriptedLLM, text: str) -> list[dict]:
    """What the model received in the turn whose last user message is `text`."""
    return [body for body in llm.requests if last_user_text(body) == text]


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def reached_model(llm: ScriptedLLM, text: str) -> bool:
    return bool(requests_for(llm, text))


async def run_ended(letta: AsyncLetta, run_id: str) -> bool:
    return (await letta.runs.retrieve(run_id)).status not in ("created", "running")


async def runs_of(letta: AsyncLetta, conversation_id: str) -> list:
    return (await letta.runs.list(conversation_id=conversation_id)).items


async def test_create_retrieve_update_and_archive(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    conversation = await letta.conversations.create(
        agent_id=agent.id, summary="Trip planning", description="About Rome", model=MODEL, context_window_limit=32000
    )
    assert conversation.id.startswith("conv-") and conversation.agent_id == agent.id
    assert (conversation.summary, conversation.description, conversation.model) == ("Trip planning", "About Rome", MODEL)
    assert conversation.context_window_limit == 32000 and not conversation.archived and conversation.archived_at is None

    llm.reply("Ciao.")
    await converse(letta, conversation.id, "hello")
    got = await letta.conversations.retrieve(conversation.id)
    listed = await history(letta, conversation.id)
    assert got.in_context_message_ids[-2:] == [m.id for m in listed if m.message_type != "system_message"]
    assert got.last_message_at is not None

    renamed = await letta.conversations.update(conversation.id, summary="Rome trip")
    assert (renamed.summary, renamed.description) == ("Rome trip", "About Rome")
    archived = await letta.conversations.update(conversation.id, archived=True)
    assert archived.archived and archived.archived_at is not None
    with pytest.raises(APIStatusError) as refused:
        await converse(letta, conversation.id, "still there?")
    assert refused.value.status_code == 409 and "archived" in str(refused.value.body)
    reopened = await letta.conversations.update(conversation.id, archived=False)
    assert not reopened.archived and reopened.archived_at is None
    llm.reply("Yes.")
    answered = await converse(letta, conversation.id, "back again?")
    assert [e.content for e in answered if isinstance(e, AssistantMessage)] == ["Yes."]
    assert [last_user_text(body) for body in llm.requests] == ["hello", "back again?"]  # the refused send reached no model
    assert said(await history(letta, conversation.id), "user_message") == ["hello", "back again?"]


async def test_list_filters_orders_and_pages(letta: AsyncLetta, llm: ScriptedLLM):
    agent, other = await new_agent(letta), await new_agent(letta)
    alpha = await letta.conversations.create(agent_id=agent.id, summary="Alpha plans")
    beta = await letta.conversations.create(agent_id=agent.id, summary="beta PLANS")
    gamma = await letta.conversations.create(agent_id=agent.id, summary="gamma")
    hidden = await letta.conversations.create(agent_id=agent.id, summary="hidden plans", hidden=True)
    elsewhere = await letta.conversations.create(agent_id=other.id, summary="Alpha plans")

    async def ids(**params) -> list[str]:
        return [c.id for c in await letta.conversations.list(**params)]

    assert await ids(agent_id=agent.id) == [gamma.id, beta.id, alpha.id]
    assert await ids(agent_id=agent.id, order="asc") == [alpha.id, beta.id, gamma.id]
    assert await ids(agent_id=agent.id, after=gamma.id) == [beta.id, alpha.id]
    assert await ids(agent_id=agent.id, after=gamma.id, limit=1) == [beta.id]
    assert await ids(agent_id=agent.id, summary_search="plans") == [beta.id, alpha.id]
    everyone = await ids(limit=1000)
    assert {alpha.id, elsewhere.id} <= set(everyone) and hidden.id not in everyone

    llm.reply("ok")
    await converse(letta, alpha.id, "hi")
    assert await ids(agent_id=agent.id, order_by="last_message_at") == [alpha.id, gamma.id, beta.id]

    await letta.conversations.update(beta.id, archived=True)
    assert await ids(agent_id=agent.id) == [gamma.id, alpha.id]
    assert await ids(agent_id=agent.id, archive_status="archived") == [beta.id]
    assert await ids(agent_id=agent.id, archive_status="all") == [gamma.id, beta.id, alpha.id]


async def test_delete_removes_the_conversation_but_not_the_agents_memory(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    conversation = await letta.conversations.create(agent_id=agent.id, extra_body={"isolated_block_labels": ["persona"]})
    word = f"zeppelin{uuid.uuid4().hex[:6]}"
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Owns a zeppelin"})]).reply("Noted.")
    await converse(letta, conversation.id, f"I own a vintage {word}")
    [user_id] = [m.id for m in await history(letta, conversation.id) if m.message_type == "user_message"]

    async def found() -> list[str]:
        return [hit.message_id for hit in await letta.messages.search(query=word, agent_id=agent.id, search_mode="fts")]

    async def searchable() -> bool:
        return user_id in await found()

    await until(searchable, "the message to be searchable")
    await letta.conversations.delete(conversation.id)

    with pytest.raises(NotFoundError):
        await letta.conversations.retrieve(conversation.id)
    with pytest.raises(NotFoundError):
        await history(letta, conversation.id)
    assert user_id not in await found()
    blocks = {b.label: b.value async for b in letta.agents.blocks.list(agent.id)}
    assert blocks == {"human": "Name: Bob\nOwns a zeppelin", "persona": "I am Sam."}


async def test_histories_and_runs_are_per_conversation(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    conversation = await letta.conversations.create(agent_id=agent.id)
    llm.reply("In the conversation.").reply("In the default.")

    await converse(letta, conversation.id, "to the conversation")
    await converse(letta, "default", "to the default", agent_id=agent.id)

    in_conversation = await history(letta, conversation.id)
    in_default = await history(letta, "default", agent_id=agent.id)
    of_agent = [m async for m in letta.agents.messages.list(agent.id, order="asc")]
    assert said(in_conversation, "user_message") == ["to the conversation"]
    assert said(in_default, "user_message") == ["to the default"]
    assert [m.id for m in of_agent] == [m.id for m in in_default]
    assert "to the conversation" not in json.dumps(llm.requests[1]["messages"])

    runs = (await letta.runs.list(agent_id=agent.id)).items
    assert sorted((r.conversation_id or "default") for r in runs) == sorted([conversation.id, "default"])
    [only] = await runs_of(letta, conversation.id)
    assert only.conversation_id == conversation.id and only.status == "completed"


async def test_two_conversations_edit_one_shared_block_concurrently(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    append = [tool async for tool in letta.tools.list(name="core_memory_append")][0]
    await letta.agents.tools.attach(append.id, agent_id=agent.id)
    one, two = [await letta.conversations.create(agent_id=agent.id) for _ in range(2)]
    edits = {
        "remember tea": {"tool_calls": [("core_memory_append", {"label": "human", "content": "Likes: tea"})], "delay": 1.0},
        "remember jazz": {"tool_calls": [("memory_insert", {"label": "human", "new_string": "Likes: jazz"})]},
    }
    llm.respond(
        lambda body: (
            {"content": "Saved."}
            if body["messages"][-1]["role"] == "tool"
            else edits.get(last_user_text(body), {"content": "ok"})
        )
    )

    tea = asyncio.create_task(converse(letta, one.id, "remember tea"))
    await until(lambda: reached_model(llm, "remember tea"), "the first turn to reach the model")
    jazz = asyncio.create_task(converse(letta, two.id, "remember jazz"))  # while the first reply is held
    turns = await asyncio.wait_for(asyncio.gather(tea, jazz), timeout=WAIT_SECONDS)

    for events in turns:
        assert [e.status for e in events if isinstance(e, ToolReturnMessage)] == ["success"]
    assert [run.status for c in (one, two) for run in await runs_of(letta, c.id)] == ["completed", "completed"]
    value = (await letta.agents.blocks.retrieve("human", agent_id=agent.id)).value
    assert "Likes: tea" in value and "Likes: jazz" in value  # no lost update
    # The second turn ran start to end while the first one's reply was held: the turns overlapped.
    assert [last_user_text(body) for body in llm.requests] == ["remember tea", "remember jazz", "remember jazz", "remember tea"]

    await converse(letta, one.id, "what do I like?")
    await converse(letta, two.id, "what else?")
    for text in ("what do I like?", "what else?"):
        assert memory_value(system_prompt_of(requests_for(llm, text)[0]), "human") == value
    assert memory_value(prompt_text(await letta.conversations.recompile(one.id, dry_run=True)), "human") == value


async def test_turns_of_one_conversation_are_serialised(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    conversation = await letta.conversations.create(agent_id=agent.id)
    answers = {"first": {"content": "First done.", "delay": 1.0}, "second": {"content": "Second done."}}
    llm.respond(lambda body: answers[last_user_text(body)])

    first = asyncio.create_task(converse(letta, conversation.id, "first"))
    await until(lambda: reached_model(llm, "first"), "the first turn to reach the model")
    second = asyncio.create_task(converse(letta, conversation.id, "second"))
    await asyncio.sleep(0.5)
    assert not requests_for(llm, "second")  # it waits for the running turn
    await asyncio.wait_for(asyncio.gather(first, second), timeout=WAIT_SECONDS)

    [later] = requests_for(llm, "second")
    assert "First done." in json.dumps(later["messages"])  # it started after the first turn ended
    assert said(await history(letta, conversation.id), "assistant_message") == ["First done.", "Second done."]


async def test_a_send_waiting_longer_than_the_turn_lock_timeout_is_refused(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    conversation = await letta.conversations.create(agent_id=agent.id)
    llm.reply("Slow answer.", delay=6.0)  # the server waits 5 s for a conversation's turn lock (conftest)

    slow = asyncio.create_task(converse(letta, conversation.id, "slow"))
    await until(lambda: reached_model(llm, "slow"), "the first turn to reach the model")
    with pytest.raises(APIStatusError) as refused:
        await converse(letta, conversation.id, "impatient")
    await asyncio.wait_for(slow, timeout=WAIT_SECONDS)

    assert refused.value.status_code == 409
    assert "busy with another active run" in refused.value.body["detail"]
    assert not requests_for(llm, "impatient")
    assert said(await history(letta, conversation.id), "user_message") == ["slow"]


async def test_an_isolated_block_is_edited_only_in_its_conversation(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    isolated = await letta.conversations.create(agent_id=agent.id, extra_body={"isolated_block_labels": ["human"]})
    shared = await letta.conversations.create(agent_id=agent.id)
    shared_human = await letta.agents.blocks.retrieve("human", agent_id=agent.id)
    [copy_id] = isolated.isolated_block_ids
    assert copy_id != shared_human.id and shared.isolated_block_ids == []

    rename = {"label": "human", "old_string": "Name: Bob", "new_string": "Name: Robert"}
    llm.reply(tool_calls=[("memory_replace", rename)]).reply("Hi Robert.").reply("ok").reply("ok")
    await converse(letta, isolated.id, "call me Robert")
    await converse(letta, shared.id, "who am I? (shared)")
    await converse(letta, isolated.id, "who am I? (isolated)")

    assert (await letta.blocks.retrieve(copy_id)).value == "Name: Robert"
    assert (await letta.agents.blocks.retrieve("human", agent_id=agent.id)).value == "Name: Bob"
    assert memory_value(system_prompt_of(requests_for(llm, "who am I? (shared)")[0]), "human") == "Name: Bob"
    assert memory_value(system_prompt_of(requests_for(llm, "who am I? (isolated)")[0]), "human") == "Name: Robert"
    assert (await letta.conversations.retrieve(isolated.id)).isolated_block_ids == [copy_id]


async def test_fork_copies_the_history_and_then_diverges(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    original = await letta.conversations.create(agent_id=agent.id, summary="original")
    llm.reply("One.").reply("Two.").reply("Default.")
    await converse(letta, original.id, "first")
    await converse(letta, original.id, "second")
    await converse(letta, "default", "in the default", agent_id=agent.id)
    copied = await history(letta, original.id)

    whole = await letta.conversations.fork(original.id)
    [one] = [m for m in copied if m.message_type == "assistant_message" and m.content == "One."]
    partial = await letta.conversations.fork(original.id, message_id=one.id)
    of_default = await letta.conversations.fork("default", agent_id=agent.id)
    hidden = await letta.conversations.fork(original.id, hidden=True)

    forked = await history(letta, whole.id)
    assert [(m.message_type, getattr(m, "content", None)) for m in forked] == [
        (m.message_type, getattr(m, "content", None)) for m in copied
    ]
    assert not {m.id for m in forked} & {m.id for m in copied}
    assert said(await history(letta, partial.id), "assistant_message") == ["One."]
    assert said(await history(letta, of_default.id), "user_message") == ["in the default"]
    assert of_default.agent_id == agent.id and whole.summary == "original"
    listed = [c.id for c in await letta.conversations.list(agent_id=agent.id)]
    assert {whole.id, partial.id, of_default.id} <= set(listed) and hidden.id not in listed
    assert said(await history(letta, hidden.id), "user_message") == ["first", "second"]

    llm.reply("Only in the fork.").reply("Only in the original.")
    await converse(letta, whole.id, "fork turn")
    await converse(letta, original.id, "original turn")
    assert said(await history(letta, whole.id), "user_message") == ["first", "second", "fork turn"]
    assert said(await history(letta, original.id), "user_message") == ["first", "second", "original turn"]
    assert "Two." in json.dumps(requests_for(llm, "fork turn")[0]["messages"])  # the window was copied
    assert "fork turn" not in json.dumps(requests_for(llm, "original turn")[0]["messages"])


async def test_compact_and_recompile(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    conversation = await letta.conversations.create(agent_id=agent.id)
    llm.reply("Nice to meet you.").reply("Paris is lovely.")
    await converse(letta, conversation.id, "My name is Bob")
    await converse(letta, conversation.id, "I live in Paris")
    window = (await letta.conversations.retrieve(conversation.id)).in_context_message_ids
    default_window = (await letta.agents.retrieve(agent.id)).message_ids

    llm.reply("Bob lives in Paris.")
    compacted = await letta.conversations.messages.compact(conversation.id)

    assert compacted.summary == "Bob lives in Paris."
    assert compacted.num_messages_before > compacted.num_messages_after >= 1
    assert len((await letta.conversations.retrieve(conversation.id)).in_context_message_ids) < len(window)
    assert {"My name is Bob", "I live in Paris"} <= set(said(await history(letta, conversation.id), "user_message"))
    assert (await letta.agents.retrieve(agent.id)).message_ids == default_window

    for dry_run in (True, False):
        prompt = prompt_text(await letta.conversations.recompile(conversation.id, dry_run=dry_run))
        assert conversation.id in prompt and memory_value(prompt, "human") == "Name: Bob"
    assert conversation.id not in prompt_text(await letta.conversations.recompile("default", agent_id=agent.id))


async def test_cancel_stops_only_that_conversations_run(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    held, other = [await letta.conversations.create(agent_id=agent.id) for _ in range(2)]
    llm.respond(lambda body: {"content": "too late", "delay": 20.0})
    stream = await letta.conversations.messages.create(held.id, input="slow one", background=True)
    await until(lambda: reached_model(llm, "slow one"), "the held turn to reach the model")

    assert await letta.conversations.cancel(other.id) == {}
    [run] = await runs_of(letta, held.id)
    assert run.status == "running"
    assert await letta.conversations.cancel(held.id) == {run.id: "cancelled"}
    await until(lambda: run_ended(letta, run.id), "the cancelled run to end")
    await stream.close()

    ended = await letta.runs.retrieve(run.id)
    assert ended.status == "cancelled" and ended.stop_reason == "cancelled"


async def test_stream_resumes_a_background_send(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    conversation = await letta.conversations.create(agent_id=agent.id)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: rain"})]).reply("Resumed.", delay=0.5)
    sent = {"role": "user", "content": "I like rain", "otid": f"otid-{uuid.uuid4()}"}

    stream = await letta.conversations.messages.create(conversation.id, messages=[sent], background=True)
    seen = []
    async for event in stream:
        seen.append(event)
        if event.message_type == "tool_call_message":
            break
    await stream.close()
    run_id = seen[-1].run_id
    await until(lambda: run_ended(letta, run_id), "the background run to end")

    rest = [
        e async for e in await letta.conversations.messages.stream(conversation.id, run_id=run_id, starting_after=seen[-1].seq_id)
    ]
    by_otid = [e async for e in await letta.conversations.messages.stream(conversation.id, otid=sent["otid"])]

    assert [e.message_type for e in rest][:3] == ["tool_return_message", "assistant_message", "stop_reason"]
    assert rest[1].content == "Resumed."
    assert [e.message_type for e in by_otid][: len(seen)] == [e.message_type for e in seen]
    assert [e.seq_id for e in by_otid][len(seen) :] == [e.seq_id for e in rest]
