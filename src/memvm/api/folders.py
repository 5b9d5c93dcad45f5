"""Folders (Letta's sources) and their attachment to agents. Their files come with the upload pipeline."""

from typing import Annotated

from fastapi import Depends, File, Path, Query, Response, UploadFile
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents import service as agents
from memvm.api import errors
from memvm.api.deps import AgentId, RuntimeDep, TransactionDep, page_params
from memvm.api.routers import api_router
from memvm.api.schemas import NULL_ANSWER
from memvm.db.pagination import PageRequest
from memvm.embeddings.ports import EmbeddingModel
from memvm.files import service, uploads, views
from memvm.files.schemas import DuplicateHandling, FileRead, FolderCreate, FolderRead, FolderUpdate
from memvm.ids import id_pattern

router = api_router(tags=["folders"])
FolderId = Annotated[str, Path(pattern=id_pattern("source"), description="source-<uuid4>")]
FileId = Annotated[str, Path(pattern=id_pattern("file"), description="file-<uuid4>")]
PageDep = Annotated[PageRequest, Depends(page_params(50, "asc"))]
FilePageDep = Annotated[PageRequest, Depends(page_params(1000, "desc"))]  # Letta's defaults for files
IncludeContent = Annotated[bool, Query(description="Whether to include the parsed text of each file.")]


@router.post("/v1/folders/", response_model=FolderRead)
async def create_folder(body: FolderCreate, runtime: RuntimeDep, tx: TransactionDep) -> FolderRead:
    """Create a folder; its embedding model (`embedding`, else `embedding_config`, else the server's) is fixed from now on."""
    model = EmbeddingModel.of(runtime.embedders.for_handle(body.embedding_handle()))
    async with tx() as session:
        return FolderRead.of(await service.create_folder(session, body, model))


@router.get("/v1/folders/", response_model=list[FolderRead])
async def list_folders(tx: TransactionDep, page: PageDep, name: str | None = None) -> list[FolderRead]:
    """Folders, oldest first; filter by name."""
    async with tx() as session:
        return [FolderRead.of(folder) for folder in await service.list_folders(session, page, name=name)]


@router.get("/v1/folders/{folder_id}", response_model=FolderRead)
async def retrieve_folder(folder_id: FolderId, tx: TransactionDep) -> FolderRead:
    """One folder."""
    async with tx() as session:
        return FolderRead.of(await service.get_folder(session, folder_id))


@router.patch("/v1/folders/{folder_id}", response_model=FolderRead)
async def update_folder(folder_id: FolderId, body: FolderUpdate, tx: TransactionDep) -> FolderRead:
    """Rename a folder or change its description, instructions or metadata."""
    async with tx() as session:
        return FolderRead.of(await service.update_folder(session, folder_id, body))


@router.delete("/v1/folders/{folder_id}", responses=NULL_ANSWER)
async def delete_folder(folder_id: FolderId, tx: TransactionDep) -> None:
    """Delete a folder; it is detached from every agent."""
    async with tx() as session:
        await service.delete_folder(session, folder_id)


@router.get("/v1/folders/{folder_id}/agents", response_model=list[str])
async def list_folder_agents(folder_id: FolderId, tx: TransactionDep, page: PageDep) -> list[str]:
    """Ids of the agents the folder is attached to."""
    async with tx() as session:
        return await service.agents_of_folder(session, folder_id, page)


@router.post("/v1/folders/{folder_id}/upload", response_model=FileRead, responses=errors.UNSUPPORTED_MEDIA_TYPE)
async def upload_file_to_folder(
    folder_id: FolderId,
    file: Annotated[UploadFile, File(description="The file; its type comes from its name's extension, else its content type.")],
    runtime: RuntimeDep,
    tx: TransactionDep,
    response: Response,
    duplicate_handling: Annotated[DuplicateHandling, Query(description="When the folder has a file of this name.")] = "suffix",
    name: Annotated[str | None, Query(max_length=uploads.MAX_NAME_CHARS, description="Store it under this name.")] = None,
) -> FileRead:
    """Upload a file to a folder. It is answered at once with status `parsing`; it is read, chunked
    and embedded in the background (poll the file for `completed` or `error`). A duplicate skipped
    is answered with the file already there and the header `X-Upload-Result: skipped`."""
    upload = uploads.Upload(file.filename or "", file.content_type, await file.read(), name, duplicate_handling)
    async with tx() as session:
        uploaded = await uploads.upload_file(session, folder_id, upload, max_bytes=runtime.settings.max_file_upload_bytes)
        answer = FileRead.of(uploaded.file)
    if uploaded.skipped:
        response.headers["X-Upload-Result"] = "skipped"
    else:
        runtime.file_wakeup.set()
    return answer


@router.get("/v1/folders/{folder_id}/files", response_model=list[FileRead])
async def list_folder_files(
    folder_id: FolderId, tx: TransactionDep, page: FilePageDep, include_content: IncludeContent = False
) -> list[FileRead]:
    """The folder's files, newest first."""
    async with tx() as session:
        files = await uploads.list_files(session, folder_id, page, include_content=include_content)
        return [FileRead.of(file, content=file.content if include_content else None, qualified=False) for file in files]


@router.get("/v1/folders/{folder_id}/files/{file_id}", response_model=FileRead)
async def retrieve_folder_file(
    folder_id: FolderId, file_id: FileId, tx: TransactionDep, include_content: IncludeContent = False
) -> FileRead:
    """One file of the folder, with its processing status and progress."""
    async with tx() as session:
        file = await uploads.get_file(session, folder_id, file_id, include_content=include_content)
        return FileRead.of(file, content=file.content if include_content else None, qualified=False)


@router.delete("/v1/folders/{folder_id}/{file_id}", status_code=204)
async def delete_folder_file(folder_id: FolderId, file_id: FileId, tx: TransactionDep) -> None:
    """Delete a file of the folder: it is closed in every agent, its chunks go with it."""
    async with tx() as session:
        await uploads.delete_file(session, folder_id, file_id)


@router.get("/v1/agents/{agent_id}/folders", response_model=list[FolderRead])
async def list_agent_folders(agent_id: AgentId, tx: TransactionDep, page: PageDep) -> list[FolderRead]:
    """The folders attached to the agent, oldest first."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        return [FolderRead.of(folder) for folder in await service.folders_of_agent(session, agent_id, page)]


@router.patch("/v1/agents/{agent_id}/folders/attach/{folder_id}", responses=NULL_ANSWER)
async def attach_folder(agent_id: AgentId, folder_id: FolderId, tx: TransactionDep) -> None:
    """Attach a folder to the agent; attaching it again changes nothing."""
    async with tx() as session:
        await _lock_folder_and_agent(session, agent_id, folder_id)
        await service.attach_folder(session, agent_id, folder_id)


@router.patch("/v1/agents/{agent_id}/folders/detach/{folder_id}", responses=NULL_ANSWER)
async def detach_folder(agent_id: AgentId, folder_id: FolderId, tx: TransactionDep) -> None:
    """Detach a folder from the agent; the folder remains."""
    async with tx() as session:
        await _lock_folder_and_agent(session, agent_id, folder_id)
        await service.detach_folder(session, agent_id, folder_id)


async def _lock_folder_and_agent(session: AsyncSession, agent_id: str, folder_id: str) -> None:
    """The lock order of files/service.py: the folder (shared: attaches of it to other agents go on),
    then the agent's files lock (a turn's open_files holds it while it locks the agent row), then the
    agent row."""
    await service.lock_folders(session, [folder_id])
    await views.lock_files(session, agent_id)
    await agents.get_agent(session, agent_id, lock=True)
