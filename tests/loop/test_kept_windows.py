"""Context windows kept between turns (runtime/loop/kept_windows.py): a turn reads only the messages stored
since the last, and sends the model exactly what a read of the whole window would; any change the model
would see (an edit, an eviction) makes it read the window again, a bookkeeping write does not."""

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.uow import transaction
from memvm.messages import repository as messages
from memvm.runtime.loop.conversation import ChatHistory
from memvm.runtime.loop.kept_windows import KeptWindows, WindowRead
from tests.support.api import create_agent
from tests.support.pg import next_seq

MODEL = {"model": "openai/scripted-model"}


async def send(client, agent_id: str, text: str) -> None:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": text}]})
    assert response.status_code == 200, response.text


def sent_history(llm, request: int = -1) -> list[dict]:
    """The messages a model call was sent, but the system prompt."""
    return llm.requests[request]["messages"][1:]


async def read(windows: KeptWindows, sessionmaker: async_sessionmaker[AsyncSession], agent_id: str) -> WindowRead:
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        return await windows.read(session, DEFAULT_ORGANIZATION_ID, agent_id, None)


async def test_a_turn_sends_the_kept_window_and_what_was_stored_since(client, llm, sessionmaker):
    agent = await create_agent(client, **MODEL)
    llm.reply("One.").reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})])
    llm.reply("Noted.").reply("Three.")
    for text in ("first", "second", "third"):
        await send(client, agent["id"], text)
    windows = KeptWindows(max_tokens=100_000)
    whole, again = await read(windows, sessionmaker, agent["id"]), await read(windows, sessionmaker, agent["id"])
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        stored = ChatHistory.of(await messages.in_context(session, agent["id"], None))

    roles = [message["role"] for message in sent_history(llm)]
    assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant", "user"]
    assert sent_history(llm)[:-1] == sent_history(llm, -2) + [{"role": "assistant", "content": "Noted."}]
    assert (whole.reused, again.reused) == (0, 8)
    assert (again.history.messages, again.history.tokens) == (stored.messages, stored.tokens)
    assert (whole.history.messages, whole.history.tokens) == (stored.messages, stored.tokens)


async def window_kept_at_the_second_turn(client, llm, first: str) -> str:
    """An agent whose second turn ("again") kept the window with the first exchange (`first`, "One."),
    and the model's answer to a third turn ready."""
    agent = await create_agent(client, **MODEL)
    llm.reply("One.").reply("Two.").reply("Three.")
    await send(client, agent["id"], first)
    await send(client, agent["id"], "again")
    return agent["id"]


async def test_an_edit_the_model_reads_is_sent_at_the_next_turn(client, llm, db):
    agent_id = await window_kept_at_the_second_turn(client, llm, "my name is Bob")
    await db.execute("UPDATE message SET content = 'I am Robert' WHERE agent_id = $1 AND content = 'my name is Bob'", agent_id)
    await send(client, agent_id, "who am I?")

    assert [message["content"] for message in sent_history(llm)] == ["I am Robert", "One.", "again", "Two.", "who am I?"]


async def test_an_evicted_message_is_not_sent_at_the_next_turn(client, llm, db):
    agent_id = await window_kept_at_the_second_turn(client, llm, "forget this")
    await db.execute("UPDATE message SET in_context = false WHERE agent_id = $1 AND content = 'forget this'", agent_id)
    await send(client, agent_id, "what now?")

    assert [message["content"] for message in sent_history(llm)] == ["One.", "again", "Two.", "what now?"]


async def test_a_write_the_model_does_not_read_keeps_the_window(client, llm, db, sessionmaker):
    agent = await create_agent(client, **MODEL)
    llm.reply("One.")
    await send(client, agent["id"], "hello")
    windows = KeptWindows(max_tokens=100_000)
    first = await read(windows, sessionmaker, agent["id"])
    await db.execute("UPDATE message SET embed_attempts = embed_attempts + 1 WHERE agent_id = $1", agent["id"])
    kept = await read(windows, sessionmaker, agent["id"])
    await db.execute("UPDATE message SET tool_status = 'error' WHERE agent_id = $1 AND role = 'assistant'", agent["id"])
    changed = await read(windows, sessionmaker, agent["id"])

    assert (first.reused, kept.reused, changed.reused) == (0, 2, 0)


async def test_windows_past_the_token_budget_go_least_recently_read_first(client, llm, sessionmaker):
    agents = [await create_agent(client, **MODEL, name=name) for name in ("a", "b", "c")]
    llm.reply("One.").reply("Two.").reply("Six.")  # windows of one size
    for agent in agents:
        await send(client, agent["id"], "hello")
    size = (await read(KeptWindows(max_tokens=100_000), sessionmaker, agents[0]["id"])).history.tokens
    windows = KeptWindows(max_tokens=2 * size)
    a, b, c = (agent["id"] for agent in agents)
    for agent_id in (a, b, a, c):  # c's window pushes out b's, the least recently read
        await read(windows, sessionmaker, agent_id)

    assert [(await read(windows, sessionmaker, agent_id)).reused for agent_id in (a, c, b)] == [2, 2, 0]
    assert (await read(KeptWindows(max_tokens=0), sessionmaker, a)).reused == 0


async def test_a_new_running_summary_is_sent_first(client, llm, db):
    agent_id = await window_kept_at_the_second_turn(client, llm, "hello")
    await db.execute(
        "INSERT INTO message (organization_id, id, agent_id, role, kind, content, in_context, seq)"
        f" SELECT organization_id, 'message-summary', id, 'user', 'summary', 'Earlier: hello.', true, {next_seq('agent.id')}"
        " FROM agent WHERE id = $1",
        agent_id,
    )
    await send(client, agent_id, "and again")

    sent = [message["content"] for message in sent_history(llm)]
    assert sent == ["Earlier: hello.", "hello", "One.", "again", "Two.", "and again"]


async def test_each_conversation_sends_its_own_window_and_keeps_it_apart(client, llm, db, sessionmaker):
    agent = await create_agent(client, **MODEL)
    other = (await client.post("/v1/conversations/", params={"agent_id": agent["id"]})).json()["id"]
    for answer in ("One.", "Two.", "Three.", "Four.", "Five."):
        llm.reply(answer)
    for path, text in [(f"agents/{agent['id']}", "a1"), (f"conversations/{other}", "b1")]:
        for turn in (text, text.replace("1", "2")):
            response = await client.post(f"/v1/{path}/messages", json={"input": turn, "streaming": False})
            assert response.status_code == 200, response.text
    await db.execute("UPDATE message SET content = 'b1, edited' WHERE conversation_id = $1 AND content = 'b1'", other)
    response = await client.post(f"/v1/conversations/{other}/messages", json={"input": "b3", "streaming": False})
    windows = KeptWindows(max_tokens=100_000)
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        reads = [await windows.read(session, DEFAULT_ORGANIZATION_ID, agent["id"], thread) for thread in (other, None, other)]

    assert response.status_code == 200, response.text
    assert [message["content"] for message in sent_history(llm, 1)] == ["a1", "One.", "a2"]
    assert [message["content"] for message in sent_history(llm)] == ["b1, edited", "Three.", "b2", "Four.", "b3"]
    assert [read.reused for read in reads] == [0, 0, 6]
