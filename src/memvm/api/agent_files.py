"""An agent's files (letta-client's agents.files): which files of its folders it sees, open or
closed, and opening and closing them for it."""

from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import BaseModel

from memvm.agents import service as agents
from memvm.api.deps import AgentId, TransactionDep
from memvm.api.routers import api_router
from memvm.db.pagination import PageRequest
from memvm.files import views
from memvm.files.schemas import AgentFileRead
from memvm.ids import id_pattern

router = api_router(tags=["agents"])
FileId = Annotated[str, Path(pattern=id_pattern("file"), description="file-<uuid4>")]
ViewCursor = Annotated[
    str | None, Query(pattern=id_pattern("file_agent"), description="The id of a listed item (file_agent-<uuid4>).")
]


class AgentFilesPage(BaseModel):
    files: list[AgentFileRead]
    next_cursor: str | None  # the last item's id when more follow: pass it as `after`
    has_more: bool


@router.get("/v1/agents/{agent_id}/files", response_model=AgentFilesPage)
async def list_agent_files(
    agent_id: AgentId,
    tx: TransactionDep,
    before: ViewCursor = None,
    after: ViewCursor = None,
    cursor: Annotated[str | None, Query(pattern=id_pattern("file_agent"), deprecated=True, description="As `after`.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    order: Annotated[Literal["asc", "desc"], Query(description="By the files' upload time.")] = "desc",
    order_by: Literal["created_at"] = "created_at",
    is_open: Annotated[bool | None, Query(description="Only open (true) or only closed (false) files.")] = None,
) -> AgentFilesPage:
    """The files of the agent's folders as it sees them: open or closed, and what an open one shows."""
    page = PageRequest(limit=limit, order=order, before=before, after=after or (cursor if before is None else None))
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        files, has_more = await views.list_views(session, agent_id, page, is_open=is_open)
    return AgentFilesPage(files=files, next_cursor=files[-1].id if has_more else None, has_more=has_more)


@router.patch("/v1/agents/{agent_id}/files/close-all", response_model=list[str])
async def close_all_agent_files(agent_id: AgentId, tx: TransactionDep) -> list[str]:
    """Close every open file of the agent; answers the names of those closed."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        return await views.close_all(session, agent_id)


@router.patch("/v1/agents/{agent_id}/files/{file_id}/open", response_model=list[str])
async def open_agent_file(agent_id: AgentId, file_id: FileId, tx: TransactionDep) -> list[str]:
    """Open a file in the agent's prompt from its first line, as much as fits; answers the names of
    the files closed to stay within the agent's max_files_open (least recently used first)."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        return await views.open_file(session, agent_id, file_id)


@router.patch("/v1/agents/{agent_id}/files/{file_id}/close")
async def close_agent_file(agent_id: AgentId, file_id: FileId, tx: TransactionDep) -> dict[str, Any]:
    """Close a file: it stays listed in the agent's prompt, without its text."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        await views.close_file(session, agent_id, file_id)
    return {"message": f"File id={file_id} successfully closed"}
