"""Agent files (`.af`): import Letta's exports (and memvm's), export memvm agents."""

import json
from typing import Annotated, Any

from fastapi import File, Form, Header, Query, Response, UploadFile

from memvm.agentfiles.exporter import export_agent
from memvm.agentfiles.importer import ImportContext, import_agent_file
from memvm.agentfiles.schemas import ImportOptions, ImportResult
from memvm.api.auth import CallerDep
from memvm.api.deps import AgentId, RuntimeDep, SessionmakerDep, TransactionDep
from memvm.api.routers import api_router
from memvm.errors import InvalidInput

router = api_router(prefix="/v1/agents", tags=["agents"])
OptionalText = Annotated[str | None, Form()]
Flag = Annotated[bool, Form()]


@router.post("/import", response_model=ImportResult)
async def import_file(
    runtime: RuntimeDep,
    sessionmaker: SessionmakerDep,
    caller: CallerDep,
    file: Annotated[UploadFile, File(description="The agent file (.af, JSON), as Letta or memvm exported it.")],
    append_copy_suffix: Flag = False,
    override_name: OptionalText = None,
    name: OptionalText = None,
    model: OptionalText = None,
    override_model_handle: OptionalText = None,
    embedding: OptionalText = None,
    override_embedding_handle: OptionalText = None,
    strip_messages: Flag = False,
    secrets: OptionalText = None,
    env_vars_json: OptionalText = None,
    override_existing_tools: Flag = False,
    project_id: OptionalText = None,  # Letta Cloud's projects; nothing here
    truncate_blocks: Annotated[bool, Form(description="Cut over-limit block values instead of refusing.")] = False,
    skip_unpaired_messages: Annotated[bool, Form(description="Drop unanswered tool calls instead of refusing.")] = False,
    x_override_embedding_model: Annotated[str | None, Header()] = None,
) -> ImportResult:
    """Recreate the file's agents with their blocks (shared ones shared again), custom tools, tool
    rules, history and context window, archival passages (embedded again), and folders (`sources`)
    with their files (chunked and embedded again) and each agent's open files. One transaction: a
    file with any problem is refused whole with a 400 that lists every problem. Parts memvm does not
    support (groups, MCP servers, skills) are listed under `skipped`."""
    options = ImportOptions(
        name=name or override_name,
        append_copy_suffix=append_copy_suffix,
        model=model or override_model_handle,
        embedding=embedding or override_embedding_handle or x_override_embedding_model,
        strip_messages=strip_messages,
        secrets=_variables(secrets or env_vars_json),
        override_existing_tools=override_existing_tools,
        truncate_blocks=truncate_blocks,
        skip_unpaired_messages=skip_unpaired_messages,
    )
    context = ImportContext(sessionmaker, runtime.embedders, caller)
    result = await import_agent_file(context, file.file, options)
    runtime.embedding_wakeup.set()  # the imported history waits for its vectors
    return result


def _variables(text: str | None) -> dict[str, str] | None:
    if text is None or not text.strip():
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidInput(f'secrets must be a JSON object of names to values, e.g. {{"API_KEY": "…"}} ({error}).') from None
    if not isinstance(parsed, dict) or not all(isinstance(value, str) for value in parsed.values()):
        raise InvalidInput('secrets must be a JSON object of names to string values, e.g. {"API_KEY": "…"}.')
    return parsed


_AGENT_FILE: dict[int | str, dict[str, Any]] = {
    200: {"description": "The agent file.", "content": {"application/json": {"schema": {"type": "object"}}}}
}


@router.get("/{agent_id}/export", response_class=Response, responses=_AGENT_FILE)
async def export_file(
    agent_id: AgentId,
    runtime: RuntimeDep,
    tx: TransactionDep,
    scrub_messages: bool = Query(False, description="Leave the history out."),
    use_legacy_format: bool = Query(False, description="Letta's legacy single-agent format."),
    include_archival: bool = Query(False, description="memvm: include the archives the agent reads, with their passages."),
    conversation_id: str | None = Query(None, description="Letta's conversations; memvm has one history per agent."),
    max_steps: int | None = Query(None, description="Accepted for the SDK; the whole history is exported."),
) -> Response:
    """The agent as an agent file (JSON, indented): Letta's multi-entity format by default."""
    if conversation_id is not None:
        raise InvalidInput("memvm keeps one history per agent; omit conversation_id to export it.")
    async with tx() as session:
        file = await export_agent(
            session,
            agent_id,
            scrub_messages=scrub_messages,
            use_legacy_format=use_legacy_format,
            include_archival=include_archival,
            default_model=runtime.settings.default_model,
        )
    return Response(json.dumps(file, indent=2, ensure_ascii=False), media_type="application/json")
