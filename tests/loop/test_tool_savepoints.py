"""Built-in tools that are refused before they write run without a savepoint (runtime/tools/executor.py):
a refused call must leave the step's transaction usable and nothing of its own behind."""

from memvm.runtime.tools.executor import HANDLERS, NEED_NO_SAVEPOINT
from tests.loop.test_memory_tools import agent_changes, make_agent, returns_of, send, value

REFUSED_CALLS = [
    ("memory_replace", {"label": "human", "old_string": "Alice", "new_string": "Carol"}),
    ("core_memory_replace", {"label": "human", "old_content": "Alice", "new_content": "Carol"}),
    ("core_memory_append", {"label": "human", "content": "x" * 40}),  # over the block's limit
    ("memory_insert", {"label": "human", "new_string": "far away", "insert_line": 99}),
    ("memory_rethink", {"label": "policy", "new_memory": "be rude"}),
    ("conversation_search", {"query": "Bob", "roles": ["narrator"]}),
    ("archival_memory_search", {"query": "Bob", "tag_match_mode": "some"}),
]


def test_every_tool_without_a_savepoint_is_a_handler():
    assert not NEED_NO_SAVEPOINT - HANDLERS.keys()


async def test_refused_calls_without_a_savepoint_leave_the_step_able_to_write(client, llm, db):
    agent = await make_agent(
        client,
        tools=["core_memory_append", "core_memory_replace", "memory_rethink", "conversation_search", "archival_memory_search"],
        blocks=[
            {"label": "human", "value": "Name: Bob", "limit": 40},
            {"label": "policy", "value": "be kind", "read_only": True},
        ],
    )
    assert {name for name, _ in REFUSED_CALLS} <= NEED_NO_SAVEPOINT
    written = ("memory_insert", {"label": "human", "new_string": "Likes tea"})
    llm.reply(tool_calls=[*REFUSED_CALLS, written]).reply("done")

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "end_turn"
    assert [returned["status"] for returned in returns_of(body)] == ["error"] * len(REFUSED_CALLS) + ["success"]
    assert await value(client, agent["id"], "human") == "Name: Bob\nLikes tea"
    assert [(row["change"], row["label"]) for row in await agent_changes(db)] == [("update", "human")]
