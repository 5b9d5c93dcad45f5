"""Exporting an agent as an agent file in Letta's multi-entity format (or its legacy single-agent
format), with file-local ids (`agent-0`, `block-0`, `tool-0`, `message-0`, …). The context window
is listed as Letta lists it: the compiled system prompt first (as message-0), then the window."""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memvm import __version__
from memvm.agentfiles import legacy
from memvm.agents import service as agents
from memvm.agents.schemas import derived_llm_config
from memvm.agents.views import describe
from memvm.archives import service as archives
from memvm.blocks.schemas import BlockRead
from memvm.db.pagination import PageRequest
from memvm.embeddings.local import DIM as LOCAL_DIM
from memvm.embeddings.registry import DEFAULT_EMBEDDING_HANDLE, KNOWN_DIMS
from memvm.files import service as folders
from memvm.files import uploads, views
from memvm.files.schemas import AgentFileRead, FileRead
from memvm.mcpservers import service as mcpservers
from memvm.memory.metadata import format_timestamp
from memvm.messages import service as messages
from memvm.orm import Agent, Archive, Block, Folder, FolderFile, Message, Tool
from memvm.tools import service as tools
from memvm.tools.schemas import ToolRead

AGENT_ID = "agent-0"
_PAGE = 500  # files and views read at a time


async def export_agent(
    session: AsyncSession,
    agent_id: str,
    *,
    scrub_messages: bool,
    use_legacy_format: bool,
    include_archival: bool,
    default_model: str | None = None,
) -> dict[str, Any]:
    """`default_model`: the server's, written as the llm_config of an agent that names no model (a
    Letta server cannot create an agent without one)."""
    agent = await agents.get_agent(session, agent_id)
    [view] = await describe(session, [agent], include=None)
    llm_config = view.llm_config or (derived_llm_config(default_model, agent.context_window_limit) if default_model else None)
    blocks = await agents.agent_blocks(session, agent_id)
    attached_tools = await tools.agent_tools(session, agent_id)
    attached = await archives.archives_of(session, agent_id) if include_archival else []
    attached.sort(key=lambda archive: archive.id != agent.default_archive_id)  # the default one first
    history = [] if scrub_messages else await messages.history(session, agent_id)
    window = [] if scrub_messages else await messages.in_context(session, agent_id)
    file_ids = {message.id: f"message-{index}" for index, message in enumerate(history, start=1)}
    folders = await _folders(session, agent_id)
    agent_entry = _agent(agent, llm_config, blocks, attached_tools, attached) | {
        "in_context_message_ids": [] if scrub_messages else ["message-0", *(file_ids[m.id] for m in window)],
        "messages": [] if scrub_messages else [_system_message(agent), *(_message(m, file_ids[m.id], agent) for m in history)],
        "source_ids": [source["id"] for source in folders.sources],
        "files_agents": folders.views,
    }
    file = {
        "agents": [agent_entry],
        "groups": [],
        "blocks": [_block(block, index) for index, block in enumerate(blocks)],
        "files": folders.files,
        "sources": folders.sources,
        "tools": [_tool(tool, index) for index, tool in enumerate(attached_tools)],
        "mcp_servers": await _mcp_servers(session, attached_tools),
        "skills": [],
        "metadata": {"memvm_version": __version__},
        "created_at": datetime.now(UTC).isoformat(),
        "archives": [await _archive(session, archive, index) for index, archive in enumerate(attached)],
    }
    return legacy.from_current(file, _embedding_config(agent.embedding, required=True)) if use_legacy_format else file


def _agent(
    agent: Agent, llm_config: dict[str, Any] | None, blocks: list[Block], tools: list[Tool], attached: list[Archive]
) -> dict[str, Any]:
    return {
        "id": AGENT_ID,
        "name": agent.name,
        "agent_type": agent.agent_type,
        "system": agent.system,
        "description": agent.description,
        "tags": agent.tags,
        "metadata": agent.metadata_,
        "timezone": agent.timezone,
        "tool_rules": agent.tool_rules,
        "message_buffer_autoclear": agent.message_buffer_autoclear,
        "llm_config": llm_config,
        "embedding_config": agent.embedding_config or _embedding_config(agent.embedding, required=False),
        "model": agent.model,
        "embedding": agent.embedding,
        "context_window_limit": agent.context_window_limit,
        # Letta's importer adds its base tools and rules unless told not to: the file has them all.
        "include_base_tools": False,
        "include_base_tool_rules": False,
        "include_multi_agent_tools": False,
        "include_default_source": False,
        "enable_sleeptime": False,
        "memory_blocks": [],
        "tools": [],
        "block_ids": [f"block-{index}" for index in range(len(blocks))],
        "tool_ids": [f"tool-{index}" for index in range(len(tools))],
        "group_ids": [],
        "max_files_open": agent.max_files_open,
        "per_file_view_window_char_limit": agent.per_file_view_window_char_limit,
        # Secret values stay on the server (a file is meant to be shared); their names travel, as in
        # Letta's files, so an import knows which ones to ask for.
        "tool_exec_environment_variables": dict.fromkeys(sorted(agent.tool_secrets), ""),
        "secrets": dict.fromkeys(sorted(agent.tool_secrets), ""),
        "memory_render_mode": agent.memory_render_mode,
        "memvm_llm_config": agent.llm_config,
        "memvm_embedding_config": agent.embedding_config,
        "archive_ids": [f"archive-{index}" for index in range(len(attached))],
    }


def _block(block: Block, index: int) -> dict[str, Any]:
    view = BlockRead.of(block).model_dump(mode="json")
    kept = ("label", "value", "limit", "description", "read_only", "hidden", "metadata", "tags")
    return {key: view[key] for key in kept} | {"id": f"block-{index}", "is_template": False, "version": block.version}


_TOOL_FIELDS = (
    "name", "tool_type", "description", "source_code", "json_schema", "args_json_schema", "return_char_limit",
    "tags", "pip_requirements", "default_requires_approval", "enable_parallel_execution",
)  # fmt: skip


# The built-ins Letta lets a step run side by side with others.
_PARALLEL_SAFE = frozenset({"conversation_search", "archival_memory_search"})


def _tool(tool: Tool, index: int) -> dict[str, Any]:
    """The fields of Letta's ToolSchema, which refuses any other. A built-in is written as Letta
    writes its own (its importer replaces its stored built-ins with what a file says)."""
    view = ToolRead.of(tool).model_dump(mode="json")
    entry = {field: view[field] for field in _TOOL_FIELDS} | {
        "id": f"tool-{index}",
        "source_type": "python",
        "npm_requirements": None,
        "metadata_": view["metadata"],
    }
    if tool.organization_id is None:
        builtin = {"tags": [tool.tool_type], "description": None, "enable_parallel_execution": tool.name in _PARALLEL_SAFE}
        entry |= builtin
    return entry


def _embedding_config(handle: str | None, *, required: bool) -> dict[str, Any] | None:
    """Letta's embedding_config for a handle. None for the local model in the current format: a Letta
    server cannot run it, and without a config it keeps passages as text, as for its own such agents.
    The legacy reader requires one, so that gets a description Letta can read but not use."""
    chosen = handle or DEFAULT_EMBEDDING_HANDLE
    provider, _, model = chosen.partition("/")
    if chosen.lower() == DEFAULT_EMBEDDING_HANDLE.lower():
        local = {"embedding_endpoint_type": "hugging-face", "embedding_model": model, "embedding_dim": LOCAL_DIM}
        return local | {"handle": chosen} if required else None
    dim = KNOWN_DIMS.get(model, 1536)
    endpoint = {"embedding_endpoint": "https://api.openai.com/v1"} if provider == "openai" else {}
    return {"embedding_endpoint_type": "openai", "embedding_model": model, "embedding_dim": dim, "handle": chosen} | endpoint


@dataclass(frozen=True)
class _Folders:
    sources: list[dict[str, Any]]
    files: list[dict[str, Any]]
    views: list[dict[str, Any]]  # the agent's files_agents


async def _mcp_servers(session: AsyncSession, attached: list[Tool]) -> list[dict[str, Any]]:
    """The servers of the agent's MCP tools as Letta's MCPServerSchema: how to reach them, never
    their secrets (no env, token or headers)."""
    server_ids = sorted({tool.mcp_server_id for tool in attached if tool.mcp_server_id is not None})
    servers = await mcpservers.servers_by_ids(session, server_ids)
    return [
        {
            "id": f"mcp_server-{index}",
            "server_type": server.server_type,
            "server_name": server.server_name,
            "server_url": server.server_url,
            "stdio_config": {"command": server.command, "args": server.args} if server.server_type == "stdio" else None,
            "metadata_": None,
        }
        for index, server in enumerate(servers)
    ]


async def _folders(session: AsyncSession, agent_id: str) -> _Folders:
    """The agent's folders as Letta's sources, every file of them with its text (chunks and vectors
    are made again on import), and the agent's views of them."""
    attached = (await folders.folders_of_agents(session, [agent_id]))[agent_id]
    source_ids = {folder.id: f"source-{index}" for index, folder in enumerate(attached)}
    documents = [file for folder in attached for file in await _every_file(session, folder.id)]
    ids = {file.id: f"file-{index}" for index, file in enumerate(documents)}
    seen = [view for view in await _every_view(session, agent_id) if view.file_id in ids]
    return _Folders(
        sources=[_source(folder, source_ids[folder.id]) for folder in attached],
        files=[
            FileRead.of(file, content=file.content).model_dump(mode="json", exclude={"created_at", "updated_at"})
            | {"id": ids[file.id], "source_id": source_ids[file.folder_id]}
            for file in documents
        ],
        views=[
            view.model_dump(mode="json", exclude={"folder_id", "folder_name"})
            | {
                "id": f"file_agent-{index}",
                "agent_id": AGENT_ID,
                "file_id": ids[view.file_id],
                "source_id": source_ids[view.folder_id],
            }
            for index, view in enumerate(seen)
        ],
    )


def _source(folder: Folder, file_id: str) -> dict[str, Any]:
    """Letta's SourceSchema; its embedding_config names the folder's model as Letta can read it."""
    config = _embedding_config(folder.embedding_model, required=True) or {}
    return {
        "id": file_id,
        "name": folder.name,
        "description": folder.description,
        "instructions": folder.instructions,
        "metadata": folder.metadata_,
        "embedding_config": config | {"embedding_dim": folder.embedding_dim, "embedding_chunk_size": folder.chunk_size},
    }


async def _every_file(session: AsyncSession, folder_id: str) -> list[FolderFile]:
    found: list[FolderFile] = []
    while True:
        page = PageRequest(_PAGE, "asc", after=found[-1].id if found else None)
        found += (more := await uploads.list_files(session, folder_id, page, include_content=True))
        if len(more) < _PAGE:
            return found


async def _every_view(session: AsyncSession, agent_id: str) -> list[AgentFileRead]:
    found: list[AgentFileRead] = []
    while True:
        page = PageRequest(_PAGE, "asc", after=found[-1].id if found else None)
        more, has_more = await views.list_views(session, agent_id, page, is_open=None)
        found += more
        if not has_more:
            return found


async def _archive(session: AsyncSession, archive: Archive, index: int) -> dict[str, Any]:
    passages = await archives.passages_of(session, archive.id)
    return {
        "id": f"archive-{index}",
        "name": archive.name,
        "description": archive.description,
        "metadata": archive.metadata_,
        "embedding_model": archive.embedding_model,
        "passages": [
            {"text": p.text, "tags": p.tags, "metadata": p.metadata_, "created_at": p.created_at.isoformat()} for p in passages
        ],
    }


def _system_message(agent: Agent) -> dict[str, Any]:
    return _envelope("message-0", "system", [_text(agent.compiled_system)]) | {"created_at": agent.system_compiled_at.isoformat()}


def _message(message: Message, file_id: str, agent: Agent) -> dict[str, Any]:
    at = {"created_at": message.created_at.isoformat()}
    if message.role == "tool":
        return _tool_return(message, file_id, agent) | at
    if message.kind == "approval":
        answer = json.loads(message.content or "{}")
        entry = _envelope(file_id, "approval", [])
        return (
            entry
            | at
            | {
                "approval_request_id": answer.get("approval_request_id"),
                "approvals": answer.get("approvals", []),
                "memvm_kind": "approval",
            }
        )
    content: list[dict[str, Any]] = []
    if message.reasoning:
        content.append({"type": "reasoning", "reasoning": message.reasoning, "is_native": True, "signature": None})
    if message.content is not None:
        content.append(_text(message.content))
    waits = any(call.get("requires_approval") for call in message.tool_calls or ())
    entry = _envelope(file_id, "approval" if waits else message.role, content) | at
    entry |= {"otid": message.otid, "sender_id": message.sender_id}
    if message.tool_calls:
        entry["tool_calls"] = [_openai_call(call) for call in message.tool_calls]
        entry["tool_call_id"] = message.tool_calls[0]["id"] if waits else None  # as Letta marks a request
    if message.kind != "message":
        entry["memvm_kind"] = message.kind
    return entry


def _tool_return(message: Message, file_id: str, agent: Agent) -> dict[str, Any]:
    """Packed as Letta packs a result (status, message, time in the agent's timezone)."""
    status = "Failed" if message.tool_status == "error" else "OK"
    packed = {"status": status, "message": message.content, "time": format_timestamp(message.created_at, agent.timezone)}
    text = json.dumps(packed, indent=2, ensure_ascii=False)
    returned = {
        "tool_call_id": message.tool_call_id,
        "status": message.tool_status or "success",
        "stdout": [message.tool_stdout] if message.tool_stdout else [],
        "stderr": [message.tool_stderr] if message.tool_stderr else [],
        "func_response": text,
    }
    entry = _envelope(file_id, "tool", [_text(text)]) | {"tool_call_id": message.tool_call_id, "tool_returns": [returned]}
    return entry | {"name": message.tool_name}


def _openai_call(call: dict[str, Any]) -> dict[str, Any]:
    shaped = {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
    return shaped | ({"requires_approval": True} if call.get("requires_approval") else {})


def _envelope(file_id: str, role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": file_id,
        "agent_id": AGENT_ID,
        "role": role,
        "content": content,
        "name": None,
        "otid": None,
        "sender_id": None,
        "model": None,
        "tool_calls": None,
        "tool_call_id": None,
        "tool_returns": [],
        "approve": None,
        "approval_request_id": None,
        "denial_reason": None,
        "approvals": [],
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "signature": None}
