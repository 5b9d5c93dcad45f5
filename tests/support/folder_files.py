"""Files given to an agent as the worker leaves them (rows of folder_file, file_chunk with the test
embedder's vectors, agent_file), and turns in which the scripted model calls the file tools: the
file tools' tests do not depend on uploads."""

from dataclasses import dataclass

from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.files.chunking import chunk_lines, lines_of
from memvm.ids import new_id
from memvm.orm import AgentFile, FileChunk, FolderFile
from tests.support.api import create_agent

GUIDE = "\n".join(["# Guide", "TODO: write the intro", "", "Setup is quick.", "Another todo here", "The end."])
CODE = "\n".join(["def main():", "    pass  # TODO remove", "", "main()"])


@dataclass
class Setup:
    agent_id: str
    folder_id: str
    organization_id: str


async def agent_with_folder(client, db, name="docs") -> Setup:
    agent = await create_agent(client, model="openai/scripted-model")
    folder = await client.post("/v1/folders/", json={"name": name})
    assert folder.status_code == 200, folder.text
    attached = await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{folder.json()['id']}")
    assert attached.status_code == 200, attached.text
    organization_id = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
    return Setup(agent["id"], folder.json()["id"], organization_id)


async def add_file(sessionmaker, setup: Setup, name: str, text: str, *, max_chars: int = 30, embed: bool = True) -> str:
    """A processed file given to the agent, chunked as the worker chunks (small chunks, so context
    and pages cross them), with the local model's vectors (the folder's model) unless not `embed`."""
    chunks = chunk_lines(text, max_chars)
    embedder = EmbedderRegistry().for_handle(None)
    vectors = await embedder.embed([chunk.text for chunk in chunks]) if embed else [None] * len(chunks)
    file_id = new_id("file")
    async with transaction(sessionmaker, setup.organization_id) as session:
        session.add(
            FolderFile(
                id=file_id,
                folder_id=setup.folder_id,
                file_name=name,
                original_file_name=name.rsplit("/", 1)[-1],
                file_type="text/plain",
                file_size=len(text.encode()),
                content=text,
                line_count=len(lines_of(text)),
                processing_status="completed",
                total_chunks=len(chunks),
                chunks_embedded=len(chunks),
            )
        )
        await session.flush()
        session.add_all(
            FileChunk(
                file_id=file_id,
                folder_id=setup.folder_id,
                seq=chunk.seq,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                text=chunk.text,
                embedding=vector,
                embedding_model=embedder.model if embed else None,
                embedding_dim=embedder.dim if embed else None,
                embed_attempts=0 if embed else 5,  # not embedded, and not queued for it either (orm/file.py)
            )
            for chunk, vector in zip(chunks, vectors, strict=True)
        )
        session.add(AgentFile(id=new_id("file_agent"), agent_id=setup.agent_id, file_id=file_id, folder_id=setup.folder_id))
    return file_id


async def views_of(client, agent_id: str) -> list[tuple[str, bool]]:
    """The agent's files as (name, is open), oldest upload first."""
    response = await client.get(f"/v1/agents/{agent_id}/files", params={"order": "asc"})
    assert response.status_code == 200, response.text
    return [(file["file_name"], file["is_open"]) for file in response.json()["files"]]


async def call(client, llm, agent_id, *calls) -> list[dict]:
    """One turn: the model makes these tool calls in one step, then answers. Their tool returns."""
    llm.reply(tool_calls=list(calls)).reply("done")
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": "look"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stop_reason"]["stop_reason"] == "end_turn"
    return [m for m in body["messages"] if m["message_type"] == "tool_return_message"]


async def ok(client, llm, agent_id, name, args) -> str:
    [returned] = await call(client, llm, agent_id, (name, args))
    assert returned["status"] == "success", returned["tool_return"]
    return returned["tool_return"]


async def failed(client, llm, agent_id, name, args) -> str:
    [returned] = await call(client, llm, agent_id, (name, args))
    assert returned["status"] == "error", returned["tool_return"]
    return returned["tool_return"]
