"""What an import will create, decided from the file's skeleton before anything is written (pure):
the blocks, tools and agents as memvm create requests (folders and their files: folders.py), what
is skipped, and every problem."""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from memvm.agentfiles.fileschema import AgentFile, FileAgent, FileArchive, FileBlock, FileTool
from memvm.agentfiles.folders import FoldersPlan, check_agent, plan_folders
from memvm.agentfiles.schemas import ImportOptions, SkippedPart
from memvm.agents.schemas import AgentCreate
from memvm.agents.service import check_handles
from memvm.agents.tool_rules import ToolRule, named_tools
from memvm.archives.schemas import ArchiveCreate, PassageCreate
from memvm.blocks.schemas import BlockCreate
from memvm.embeddings.registry import DEFAULT_EMBEDDING_HANDLE
from memvm.errors import DomainError
from memvm.memory import rules
from memvm.tools.builtin import BUILTIN_SPECS
from memvm.tools.schemas import ToolCreate
from memvm.tools.service import CUSTOM_TOOL_TYPE, MCP_TOOL_TYPE, check_custom_tool

_RULE: TypeAdapter[ToolRule] = TypeAdapter(ToolRule)
M = TypeVar("M", bound=BaseModel)
_UNSUPPORTED_PARTS = {
    "groups": "multi-agent groups are not supported by memvm yet",
    "mcp_servers": "MCP servers are not imported (a file holds no secrets): add them with POST /v1/mcp-servers/",
    "skills": "skills are not supported by memvm yet",
}


@dataclass
class BlockPlan:
    create: BlockCreate
    version: int | None


@dataclass
class ToolPlan:
    name: str
    custom: ToolCreate | None  # None: the built-in tool of this name, or an MCP server's
    mcp_server: str | None = None  # an MCP server's tool: its server's name in the file


@dataclass
class ArchivePlan:
    create: ArchiveCreate
    passages: list[PassageCreate]


@dataclass
class AgentPlan:
    source: FileAgent
    create: AgentCreate


@dataclass
class ImportPlan:
    file: AgentFile
    blocks: dict[str, BlockPlan] = field(default_factory=dict)
    tools: dict[str, ToolPlan] = field(default_factory=dict)
    archives: dict[str, ArchivePlan] = field(default_factory=dict)
    agents: list[AgentPlan] = field(default_factory=list)
    folders: FoldersPlan = field(default_factory=FoldersPlan)
    problems: list[str] = field(default_factory=list)
    skipped: list[SkippedPart] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan_import(file: AgentFile, options: ImportOptions) -> ImportPlan:
    plan = ImportPlan(file=file)
    if not file.agents:
        plan.problems.append("The file holds no agents.")
    for part in ("agents", "blocks", "tools", "sources", "files"):
        counts = Counter(item.id for item in getattr(file, part))
        twice = sorted(item_id for item_id, count in counts.items() if count > 1)
        if twice:
            plan.problems.append(f"{part}: ids appear more than once: {', '.join(twice)}; file ids must be unique.")
    for part, reason in _UNSUPPORTED_PARTS.items():
        if getattr(file, part):
            plan.skipped.append(SkippedPart(part=part, count=len(getattr(file, part)), reason=reason))
    for block in file.blocks:
        _plan_block(plan, block, options)
    for tool in file.tools:
        _plan_tool(plan, tool)
    for archive in file.archives:
        _plan_archive(plan, archive)
    plan.folders = plan_folders(file, options, FoldersPlan(problems=plan.problems, notes=plan.notes))
    for agent in file.agents:
        _plan_agent(plan, agent, options)
    return plan


def _plan_block(plan: ImportPlan, block: FileBlock, options: ImportOptions) -> None:
    where = f"block {block.id} ({block.label!r})"
    value = rules.clean_value(block.value)
    try:
        rules.check_label(block.label)
        rules.check_limit(block.limit)
    except DomainError as error:
        plan.problems.append(f"{where}: {error.message}")
        return
    if len(value) > block.limit:
        if not options.truncate_blocks:
            plan.problems.append(
                f"{where}: its value is {len(value)} characters, over its limit of {block.limit}; shorten it, "
                "raise the limit, or import with truncate_blocks."
            )
            return
        plan.repairs.append(f"{where}: value cut from {len(value)} to its limit of {block.limit} characters.")
        value = value[: block.limit]
    create = BlockCreate(
        label=block.label,
        value=value,
        limit=block.limit,
        description=block.description,
        read_only=block.read_only,
        hidden=block.hidden,
        metadata=block.metadata or {},
        tags=block.tags or [],
    )
    plan.blocks[block.id] = BlockPlan(create=create, version=block.version)


def _plan_tool(plan: ImportPlan, tool: FileTool) -> None:
    name = tool.display_name
    if tool.tool_type == MCP_TOOL_TYPE:
        server = (tool.metadata or {}).get("mcp") or {}
        plan.tools[tool.id] = ToolPlan(name=name, custom=None, mcp_server=str(server.get("server_name") or "unknown"))
        return
    if (tool.tool_type or CUSTOM_TOOL_TYPE) != CUSTOM_TOOL_TYPE:
        if name in BUILTIN_SPECS:
            plan.tools[tool.id] = ToolPlan(name=name, custom=None)
        else:
            reason = f"memvm has no built-in tool {name!r} (Letta type {tool.tool_type!r})"
            plan.skipped.append(SkippedPart(part=f"tool {name}", reason=reason))
        return
    where = f"tool {tool.id} ({name!r})"
    if not tool.source_code:
        plan.problems.append(f"{where}: a custom tool needs its Python source_code.")
        return
    fields = tool.model_dump(
        include={"source_code", "description", "json_schema", "args_json_schema", "return_char_limit", "tags"}
        | {"pip_requirements", "default_requires_approval", "enable_parallel_execution", "metadata"},
        exclude_none=True,
    )
    create = _validated(plan, where, ToolCreate, fields)
    if create is None:
        return
    try:
        schema = check_custom_tool(create)
    except DomainError as error:
        plan.problems.append(f"{where}: {error.message}")
        return
    plan.tools[tool.id] = ToolPlan(name=str(schema["name"]), custom=create)


def _plan_archive(plan: ImportPlan, archive: FileArchive) -> None:
    where = f"archive {archive.id} ({archive.name!r})"
    fields = {"name": archive.name, "description": archive.description, "metadata": archive.metadata or {}}
    create = _validated(plan, where, ArchiveCreate, fields)
    passages = [
        _validated(plan, f"{where} passage {index}", PassageCreate, passage.model_dump(exclude_none=True))
        for index, passage in enumerate(archive.passages)
    ]
    if create is not None and all(passages):
        plan.archives[archive.id] = ArchivePlan(create=create, passages=[p for p in passages if p is not None])


def _plan_agent(plan: ImportPlan, agent: FileAgent, options: ImportOptions) -> None:
    where = f"agent {agent.id} ({agent.name!r})"
    if agent.group_ids:
        reason = "memvm does not support groups yet"
        plan.skipped.append(SkippedPart(part=f"{where} group_ids", count=len(agent.group_ids), reason=reason))
    check_agent(plan.folders, plan.file, agent, where)
    unknown_blocks = [block_id for block_id in agent.block_ids if block_id not in {block.id for block in plan.file.blocks}]
    if unknown_blocks:
        plan.problems.append(f"{where}: block_ids names blocks the file does not contain: {', '.join(unknown_blocks)}.")
    unknown_tools = [tool_id for tool_id in agent.tool_ids if tool_id not in {tool.id for tool in plan.file.tools}]
    if unknown_tools:
        plan.problems.append(f"{where}: tool_ids names tools the file does not contain: {', '.join(unknown_tools)}.")
    unknown_archives = [i for i in agent.archive_ids if i not in {archive.id for archive in plan.file.archives}]
    if unknown_archives:
        plan.problems.append(f"{where}: archive_ids names archives the file does not contain: {', '.join(unknown_archives)}.")
    labels = [plan.blocks[block_id].create.label for block_id in agent.block_ids if block_id in plan.blocks]
    if len(set(labels)) != len(labels):
        plan.problems.append(f"{where}: two of its blocks share a label; an agent's block labels must be unique.")
    fields = _agent_fields(plan, agent, options)
    fields["tool_rules"] = _kept_rules(plan, agent, where)
    create = _validated(plan, where, AgentCreate, fields)
    if create is None:
        return
    try:
        check_handles(create)
    except DomainError as error:
        plan.problems.append(f"{where}: {error.message}")
        return
    plan.agents.append(AgentPlan(source=agent, create=create))


def check_rule_tools(plan: ImportPlan, existing: set[str]) -> None:
    """Every tool a kept rule names must come with the file or exist here (`existing`, the names
    found among the built-ins and the caller's tools)."""
    available = existing | {tool.name for tool in plan.tools.values()}
    for agent in plan.agents:
        missing = [name for name in named_tools(agent.create.tool_rules or []) if name not in available]
        if missing:
            plan.problems.append(f"agent {agent.source.id}: its tool rules name tools that exist nowhere: {', '.join(missing)}.")


def rule_tool_names(plan: ImportPlan) -> list[str]:
    return list(dict.fromkeys(name for agent in plan.agents for name in named_tools(agent.create.tool_rules or [])))


def _agent_fields(plan: ImportPlan, agent: FileAgent, options: ImportOptions) -> dict[str, Any]:
    name = options.name or agent.name
    return {
        "name": f"{name}_copy" if name and options.append_copy_suffix else name,
        "agent_type": agent.agent_type or "letta_v1_agent",
        "system": agent.system,
        "description": agent.description,
        "tags": agent.tags or [],
        "metadata": agent.metadata or {},
        "timezone": agent.timezone,
        **_model_fields(plan, agent, options),
        **_embedding_fields(plan, agent, options),
        "memory_render_mode": agent.memory_render_mode,
        "max_files_open": agent.max_files_open,
        "per_file_view_window_char_limit": agent.per_file_view_window_char_limit,
        "message_buffer_autoclear": bool(agent.message_buffer_autoclear),
        "secrets": _variables(agent) | (options.secrets or {}),
        "include_base_tools": False,
        "tool_ids": [],
        "block_ids": [],
    }


def _model_fields(plan: ImportPlan, agent: FileAgent, options: ImportOptions) -> dict[str, Any]:
    """memvm's own files carry the agent's settings as they were (no model: the server's default).
    Letta's carry an llm_config for Letta's providers: its handle (or provider/model) is kept, on this
    server's endpoint, with its context window."""
    if plan.file.written_by_memvm:
        fields = {"model": agent.model, "llm_config": agent.memvm_llm_config, "context_window_limit": agent.context_window_limit}
    else:
        llm = agent.llm_config or {}
        model = agent.model or llm.get("handle") or _handle_of(llm)
        fields = {
            "model": model,
            "llm_config": None,
            "context_window_limit": agent.context_window_limit or llm.get("context_window"),
        }
    return fields | ({"model": options.model, "llm_config": None} if options.model else {})


def _handle_of(llm: dict[str, Any]) -> str | None:
    provider, model = llm.get("model_endpoint_type") or llm.get("provider_name"), llm.get("model")
    return f"{provider}/{model}" if provider and model else None


def _embedding_fields(plan: ImportPlan, agent: FileAgent, options: ImportOptions) -> dict[str, Any]:
    """Letta's vectors are not in the file, so any model can embed the history again. A file from
    memvm keeps its model and embedding_config; a Letta model that this server may not reach becomes
    the server's default (and Letta's config, which describes that model, is not kept)."""
    if options.embedding:
        return {"embedding": options.embedding, "embedding_config": None}
    if plan.file.written_by_memvm:
        return {"embedding": agent.embedding, "embedding_config": agent.memvm_embedding_config}
    named = agent.embedding or (agent.embedding_config or {}).get("handle")
    if named and named.lower() != DEFAULT_EMBEDDING_HANDLE.lower():
        plan.notes.append(
            f"agent {agent.id}: embedding {named!r} replaced by the server's default {DEFAULT_EMBEDDING_HANDLE!r} "
            "(the history is embedded again); import with `embedding` to choose another."
        )
    return {"embedding": None, "embedding_config": None}


def _variables(agent: FileAgent) -> dict[str, str]:
    """The tool variables the file names. Their values are blank in an export (Letta's and memvm's
    alike); the import's `secrets` fill them in, as Letta's `env_vars_json` does."""
    given = agent.secrets or agent.tool_exec_environment_variables or {}
    if isinstance(given, list):
        return {str(item.get("key")): str(item.get("value") or "") for item in given if item.get("key")}
    return {str(key): str(value or "") for key, value in given.items()}


def _kept_rules(plan: ImportPlan, agent: FileAgent, where: str) -> list[dict[str, Any]]:
    """The rules as dicts; rules about tools that were skipped go too (they could never apply)."""
    skipped = {part.part.removeprefix("tool ") for part in plan.skipped if part.part.startswith("tool ")}
    kept = []
    for index, raw in enumerate(agent.tool_rules or ()):
        if not raw.get("tool_name"):  # old Letta files have rules that name no tool; they never applied
            plan.skipped.append(SkippedPart(part=f"{where} tool rule {raw.get('type')}", reason="it names no tool"))
            continue
        try:
            rule = _RULE.validate_python(raw)
        except ValidationError as error:
            plan.problems.append(f"{where}: tool_rules[{index}]: {_first_error(error)}")
            continue
        gone = [name for name in named_tools([rule]) if name in skipped]
        if gone:
            reason = f"it names {', '.join(gone)}, which memvm does not have"
            plan.skipped.append(SkippedPart(part=f"{where} tool rule {rule.type} on {rule.tool_name}", reason=reason))
            continue
        kept.append(raw)
    return kept


def _validated(plan: ImportPlan, where: str, model: type[M], fields: dict[str, Any]) -> M | None:
    try:
        return model.model_validate(fields)
    except ValidationError as error:
        plan.problems += [f"{where}: {_describe(item)}" for item in error.errors()]
        return None


def _first_error(error: ValidationError) -> str:
    return _describe(error.errors()[0])


def _describe(item: Any) -> str:
    location = ".".join(str(part) for part in item.get("loc", ()))
    return f"{location}: {item.get('msg')}" if location else str(item.get("msg"))
