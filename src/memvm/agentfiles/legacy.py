"""Letta's legacy single-agent file (what `use_legacy_format=true` exported): one agent object with
its blocks (`core_memory`) and tools inline, messages without ids, and the context window as
positions (`in_context_message_indices`). Converted here to the multi-entity shape, ids included,
so one importer reads both (pure). Its messages get the ids `message-<position>`, which the reader
assigns as it streams them (agentfiles/reader.py)."""

from typing import Any

_LEGACY_KEYS = frozenset({"core_memory", "in_context_message_indices"})


def is_legacy(skeleton: dict[str, Any]) -> bool:
    return "agents" not in skeleton and bool(_LEGACY_KEYS & skeleton.keys())


def message_id(position: int) -> str:
    return f"message-{position}"


def to_current(agent: dict[str, Any]) -> dict[str, Any]:
    blocks = [{**block, "id": f"block-{index}"} for index, block in enumerate(_list(agent.get("core_memory")))]
    tools = [{**tool, "id": f"tool-{index}"} for index, tool in enumerate(_list(agent.get("tools")))]
    current = {
        key: value
        for key, value in agent.items()
        if key not in {"core_memory", "tools", "messages", "in_context_message_indices", "tags", "multi_agent_group"}
        and key not in {"archives", "metadata", "version", "memvm_agent_type"}
    }
    current |= {
        "id": "agent-0",
        "agent_type": agent.get("memvm_agent_type") or agent.get("agent_type"),
        "tags": [tag.get("tag") if isinstance(tag, dict) else tag for tag in _list(agent.get("tags"))],
        "block_ids": [block["id"] for block in blocks],
        "tool_ids": [tool["id"] for tool in tools],
        "in_context_message_ids": [message_id(index) for index in _list(agent.get("in_context_message_indices"))],
        "messages": agent.get("messages", 0),
    }
    groups = [agent["multi_agent_group"]] if agent.get("multi_agent_group") else []
    extras = {key: agent[key] for key in ("archives", "metadata") if key in agent}
    return {"agents": [current], "blocks": blocks, "tools": tools, "groups": groups} | extras


_NOT_LEGACY_AGENT_KEYS = frozenset(
    {"id", "block_ids", "tool_ids", "in_context_message_ids", "messages", "memory_blocks", "tools", "tags"}
    | {"source_ids", "group_ids", "files_agents", "tool_exec_environment_variables", "secrets", "metadata"}
)


def from_current(file: dict[str, Any], embedding_config: dict[str, Any] | None) -> dict[str, Any]:
    """A one-agent file in the multi-entity shape → the legacy shape, with the fields Letta's legacy
    reader requires (timestamps, `template_name`, `group_id`, lists where it wants lists, an
    `embedding_config`). Its agent types predate `letta_v1_agent`: the nearest, `memgpt_v2_agent`,
    stands in (a Letta of that age then wants `send_message` attached), and memvm's own type travels
    alongside."""
    [agent] = file["agents"]
    stamps = {"created_at": file["created_at"], "updated_at": file["created_at"]}
    blocks = {block["id"]: block for block in file["blocks"]}
    tools = {tool["id"]: tool for tool in file["tools"]}
    position = {message["id"]: index for index, message in enumerate(agent["messages"])}
    variables = [{"key": key, "value": "", "description": None} | stamps for key in agent["secrets"]]
    return (
        {key: value for key, value in agent.items() if key not in _NOT_LEGACY_AGENT_KEYS}
        | stamps
        | {
            "agent_type": "memgpt_v2_agent" if agent["agent_type"] == "letta_v1_agent" else agent["agent_type"],
            "memvm_agent_type": agent["agent_type"],
            "embedding_config": agent["embedding_config"] or embedding_config,
            "core_memory": [_legacy_block(blocks[block_id], stamps) for block_id in agent["block_ids"]],
            "tools": [_without_id(tools[tool_id]) | stamps for tool_id in agent["tool_ids"]],
            "messages": [_legacy_message(message) for message in agent["messages"]],
            "in_context_message_indices": [position[message_id] for message_id in agent["in_context_message_ids"]],
            "tags": [{"tag": tag} for tag in agent["tags"]],
            "metadata_": agent["metadata"],
            "tool_exec_environment_variables": variables,
            "multi_agent_group": None,
            "archives": file["archives"],
            "metadata": file["metadata"],
            "version": file["metadata"]["memvm_version"],
        }
    )


def _legacy_block(block: dict[str, Any], stamps: dict[str, Any]) -> dict[str, Any]:
    return _without_id(block) | {"metadata_": block["metadata"], "template_name": None} | stamps


def _legacy_message(message: dict[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in message.items() if key not in ("id", "agent_id")}
    return kept | {"tool_calls": message["tool_calls"] or [], "group_id": None, "updated_at": message["created_at"]}


def _without_id(entity: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entity.items() if key != "id"}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
