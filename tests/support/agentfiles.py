"""Agent files written from a shape, in Letta's multi-entity format: for round-trip properties and
for the import benchmark (a history of any length)."""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

WORD_COUNT_SOURCE = '''def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.

    Returns:
        int: The number of words.
    """
    return len(text.split())
'''


RULE = {"type": "max_count_per_step", "tool_name": "word_count", "max_count_limit": 2}


@dataclass
class Shape:
    blocks: list[tuple[str, str, int]] = field(default_factory=lambda: [("persona", "I help.", 2000)])
    shared_blocks: int = 0  # how many of `blocks` a second agent also lists
    turns: int = 1  # user turns; every third one calls word_count
    render_mode: str = "standard"
    tags: list[str] = field(default_factory=list)
    timezone: str = "UTC"
    with_rules: bool = False
    window: int | None = None  # how many of the newest messages stay in context (None: all)


def build(shape: Shape) -> dict:
    blocks = [
        {"id": f"block-{i}", "label": label, "value": value, "limit": limit, "description": f"about {label}", "metadata": {}}
        for i, (label, value, limit) in enumerate(shape.blocks)
    ]
    tools = [
        {"id": "tool-0", "tool_type": "letta_memory_core", "name": "memory_insert", "source_code": None},
        {"id": "tool-1", "tool_type": "custom", "name": "word_count", "source_code": WORD_COUNT_SOURCE},
    ]
    agents = [_agent("agent-0", "generated", shape, [b["id"] for b in blocks])]
    if shape.shared_blocks:
        agents.append(_agent("agent-1", "generated-twin", Shape(turns=1), [b["id"] for b in blocks[: shape.shared_blocks]]))
    return {"agents": agents, "blocks": blocks, "tools": tools, "groups": [], "files": [], "sources": [], "metadata": {}}


def dumps(shape: Shape) -> bytes:
    return json.dumps(build(shape)).encode()


def _agent(agent_id: str, name: str, shape: Shape, block_ids: list[str]) -> dict:
    messages = [_message(agent_id, 0, "system", "You are generated.", None)]
    clock = datetime(2026, 1, 1, tzinfo=UTC)
    for turn in range(shape.turns):
        clock += timedelta(minutes=1)
        messages.append(_message(agent_id, len(messages), "user", f"turn {turn}: hello", clock))
        if turn % 3 == 2:
            call = f"call_{agent_id}_{turn}"
            asked = _message(agent_id, len(messages), "assistant", None, clock)
            asked["tool_calls"] = [
                {"id": call, "type": "function", "function": {"name": "word_count", "arguments": '{"text": "a b"}'}}
            ]
            messages.append(asked)
            answer = _message(agent_id, len(messages), "tool", json.dumps({"status": "OK", "message": "2"}), clock)
            answer |= {"tool_call_id": call, "name": "word_count"}
            messages.append(answer)
        messages.append(_message(agent_id, len(messages), "assistant", f"reply {turn}", clock))
    kept = messages[1:] if shape.window is None else messages[1:][-shape.window :]
    while kept and kept[0]["role"] == "tool":  # a window never starts between a call and its return
        kept = kept[1:]
    return {
        "id": agent_id,
        "name": name,
        "agent_type": "letta_v1_agent",
        "system": "You are generated.",
        "tags": shape.tags,
        "timezone": shape.timezone,
        "memory_render_mode": shape.render_mode,
        "llm_config": {"model": "scripted", "model_endpoint_type": "openai", "context_window": 32000},
        "block_ids": block_ids,
        "tool_ids": ["tool-0", "tool-1"],
        "tool_rules": [{"type": "max_count_per_step", "tool_name": "word_count", "max_count_limit": 2}]
        if shape.with_rules
        else [],
        "in_context_message_ids": [messages[0]["id"], *(m["id"] for m in kept)],
        "messages": messages,
    }


def _message(agent_id: str, index: int, role: str, text: str | None, at: datetime | None) -> dict:
    return {
        "type": "message",
        "id": f"message-{agent_id}-{index}",
        "agent_id": agent_id,
        "role": role,
        "content": [{"type": "text", "text": text}] if text is not None else [],
        "created_at": (at or datetime(2026, 1, 1, tzinfo=UTC)).isoformat(),
        "tool_calls": None,
        "tool_call_id": None,
        "tool_returns": [],
    }


async def import_one(client, file: dict, **form: str) -> dict:
    """The agent as GET /v1/agents/{id} shows it after importing `file`."""
    content = json.dumps(file).encode()
    response = await client.post("/v1/agents/import", files={"file": ("agent.af", content, "application/json")}, data=form)
    assert response.status_code == 200, response.text
    [agent_id] = response.json()["agent_ids"]
    return (await client.get(f"/v1/agents/{agent_id}")).json()


async def export_file(client, agent_id: str, *, legacy: bool) -> dict:
    response = await client.get(f"/v1/agents/{agent_id}/export", params={"use_legacy_format": str(legacy).lower()})
    assert response.status_code == 200, response.text
    return response.json()
