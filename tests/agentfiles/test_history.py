"""The history walk on its own (pure): pairing, parallel returns, the window and its summary."""

from memvm.agentfiles.fileschema import FileAgent, FileMessage
from memvm.agentfiles.history import HistoryWalk


def message(message_id: str, role: str, text: str | None = None, **fields) -> FileMessage:
    content = [{"type": "text", "text": text}] if text is not None else []
    return FileMessage.model_validate({"id": message_id, "role": role, "content": content, **fields})


def call(call_id: str, name: str = "f") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def walk(messages: list[FileMessage], window: list[str], *, repair: bool = False) -> tuple[list[dict], HistoryWalk]:
    history = HistoryWalk(agent=FileAgent(id="agent-0", in_context_message_ids=window), repair=repair)
    rows = [row for m in messages for row in history.accept(m)]
    return rows + history.finish(), history


def test_one_tool_message_with_several_returns_becomes_one_row_per_call():
    returns = [
        {"tool_call_id": "a", "status": "success", "func_response": '{"status": "OK", "message": "1"}'},
        {"tool_call_id": "b", "status": "error", "func_response": '{"status": "Failed", "message": "no"}'},
    ]
    messages = [
        message("m0", "system", "sys"),
        message("m1", "assistant", tool_calls=[call("a"), call("b")]),
        message("m2", "tool", tool_returns=returns),
    ]
    rows, history = walk(messages, ["m0", "m1", "m2"])

    assert history.problems == []
    assert [(r["role"], r.get("tool_call_id"), r.get("content"), r.get("tool_status")) for r in rows] == [
        ("assistant", None, None, None),
        ("tool", "a", "1", "success"),
        ("tool", "b", "no", "error"),
    ]


def test_a_call_without_its_return_is_a_problem_or_a_repair():
    messages = [message("m1", "assistant", "thinking", tool_calls=[call("a")]), message("m2", "user", "hi")]

    _, refused = walk(messages, [])
    rows, repaired = walk(messages, [], repair=True)

    assert len(refused.problems) == 1 and "'a'" in refused.problems[0]
    assert repaired.problems == [] and len(repaired.repairs) == 1
    assert rows[0]["tool_calls"] is None and rows[0]["content"] == "thinking"


def test_the_summary_letta_lists_first_is_marked_as_memvm_s_summary():
    messages = [message("m0", "system", "sys"), message("m1", "user", "old"), message("m2", "user", "new")]
    messages.append(message("m3", "user", "summary of before"))
    rows, history = walk(messages, ["m0", "m3", "m2"])

    assert history.problems == []
    assert [(r["file_id"], r["kind"], r["in_context"]) for r in rows] == [
        ("m1", "message", False),
        ("m2", "message", True),
        ("m3", "summary", True),
    ]


def test_a_window_in_another_order_is_reported():
    messages = [message("m1", "user", "a"), message("m2", "user", "b"), message("m3", "user", "c")]
    _, history = walk(messages, ["m2", "m3", "m1"])

    assert any("order" in problem for problem in history.problems)
