"""Folders (Letta's sources) and their attachment to agents. Their files come with the upload pipeline."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from memvm.agents import service as agents
from memvm.api.deps import AgentId, RuntimeDep, TransactionDep, page_params
from memvm.api.schemas import NULL_ANSWER
from memvm.db.pagination import PageRequest
from memvm.embeddings.ports import EmbeddingModel
from memvm.files import service
from memvm.files.schemas import FolderCreate, FolderRead, FolderUpdate
from memvm.ids import id_pattern

router = APIRouter(tags=["folders"])
FolderId = Annotated[str, Path(pattern=id_pattern("source"), description="source-<uuid4>")]
PageDep = Annotated[PageRequest, Depends(page_params(50, "asc"))]


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
        agent = await agents.get_agent(session, agent_id, lock=True)
        await service.attach_folder(session, agent.id, folder_id)


@router.patch("/v1/agents/{agent_id}/folders/detach/{folder_id}", responses=NULL_ANSWER)
async def detach_folder(agent_id: AgentId, folder_id: FolderId, tx: TransactionDep) -> None:
    """Detach a folder from the agent; the folder remains."""
    async with tx() as session:
        agent = await agents.get_agent(session, agent_id, lock=True)
        await service.detach_folder(session, agent.id, folder_id)
