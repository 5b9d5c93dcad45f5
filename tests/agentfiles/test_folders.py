"""Folders in agent files (Letta's `sources`, `files` and agents' `files_agents`): an agent's folders,
their files and the files it has open travel through an export into another organization, the
worker's chunks and vectors are made again there; a Letta-shaped file imports the same way; a file
whose views name what it does not contain is refused whole."""

import json
import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.files.processing import process_next
from memvm.files.views import OpenRequest, open_files
from memvm.search.embedding_queue import embed_pending
from tests.support.api import app_client, organization_keys

FIXTURES = Path(__file__).parent / "fixtures"
ADMIN = "admin-key"
NOTES = "".join(f"note {n}: something worth reading\n" for n in range(1, 41)).encode()
# The fields of Letta 0.16.8's SourceSchema, FileSchema and FileAgentSchema (letta/schemas/agent_file.py),
# whose base models refuse any other.
LETTA_SOURCE_FIELDS = {"id", "name", "description", "instructions", "metadata", "embedding", "embedding_chunk_size"} | {
    "embedding_config"
}
LETTA_FILE_FIELDS = {
    "id", "source_id", "file_name", "original_file_name", "file_path", "file_type", "file_size", "file_creation_date",
    "file_last_modified_date", "processing_status", "error_message", "total_chunks", "chunks_embedded", "content",
}  # fmt: skip
LETTA_FILE_AGENT_FIELDS = {
    "id", "agent_id", "file_id", "source_id", "file_name", "is_open", "visible_content", "last_accessed_at",
    "start_line", "end_line",
}  # fmt: skip
TABLES = ("agent", "block", "folder", "folder_file", "file_chunk", "agent_folder", "agent_file")


@pytest.fixture
def settings(settings):
    # The tests drive the workers; the two organizations need keys.
    return settings.model_copy(update={"embedding_worker": False, "admin_api_key": SecretStr(ADMIN)})


async def call(client, method: str, path: str, headers: dict, **kwargs) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


async def upload(client, folder_id: str, name: str, data: bytes, headers: dict) -> str:
    uploaded = await call(client, "POST", f"/v1/folders/{folder_id}/upload", headers, files={"file": (name, data, "text/plain")})
    return uploaded["id"]


async def process_files(sessionmaker) -> None:
    """What the worker does in the background: read every waiting file, then embed every chunk."""
    while await process_next(sessionmaker):
        pass
    while await embed_pending(sessionmaker, EmbedderRegistry()):
        pass


async def import_file(client, file: dict, headers: dict) -> dict:
    content = json.dumps(file).encode()
    return await call(client, "POST", "/v1/agents/import", headers, files={"file": ("agent.af", content, "application/json")})


async def files_of(client, folder_id: str, headers: dict) -> dict[str, dict]:
    listed = await call(client, "GET", f"/v1/folders/{folder_id}/files", headers, params={"include_content": "true"})
    return {file["file_name"]: file for file in listed}


async def views_of(client, agent_id: str, headers: dict) -> dict[str, tuple]:
    listed = await call(client, "GET", f"/v1/agents/{agent_id}/files", headers)
    return {f["file_name"]: (f["is_open"], f["start_line"], f["end_line"], f["visible_content"]) for f in listed["files"]}


async def prompt_of(client, agent_id: str, headers: dict) -> str:
    return await call(client, "POST", f"/v1/agents/{agent_id}/recompile", headers, params={"dry_run": "true"})


async def test_folders_files_and_open_views_round_trip_into_another_organization(settings, sessionmaker, db):
    async with app_client(settings) as client:
        a, b = await organization_keys(client, ADMIN, "a", "b")
        body = {"name": "docs", "description": "Project notes", "instructions": "Cite lines.", "embedding_chunk_size": 20}
        folder = await call(client, "POST", "/v1/folders/", a, json=body)
        notes_id = await upload(client, folder["id"], "notes.txt", NOTES, a)
        guide_id = await upload(client, folder["id"], "guide.md", b"# Guide\n\nStep one.\n", a)
        await process_files(sessionmaker)
        agent = await call(client, "POST", "/v1/agents/", a, json={"name": "reader", "max_files_open": 3})
        await call(client, "PATCH", f"/v1/agents/{agent['id']}/folders/attach/{folder['id']}", a)
        organization = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
        async with transaction(sessionmaker, organization) as session:
            await open_files(session, agent["id"], [OpenRequest("docs/notes.txt", offset=10, length=5)], close_all_others=False)
        await call(client, "PATCH", f"/v1/agents/{agent['id']}/files/{guide_id}/close", a)

        file = await call(client, "GET", f"/v1/agents/{agent['id']}/export", a)
        result = await import_file(client, file, b)
        [copy_id] = result["agent_ids"]
        copy = await call(client, "GET", f"/v1/agents/{copy_id}", b)
        [copied_folder] = await call(client, "GET", f"/v1/agents/{copy_id}/folders", b)
        copied = await files_of(client, copied_folder["id"], b)
        query = "SELECT start_line, end_line, text, embedding IS NULL AS waiting FROM file_chunk WHERE folder_id = $1 ORDER BY id"
        chunks = await db.fetch(query, copied_folder["id"])
        await process_files(sessionmaker)
        processed = await files_of(client, copied_folder["id"], b)
        original_views, copied_views = await views_of(client, agent["id"], a), await views_of(client, copy_id, b)
        original_prompt, copied_prompt = await prompt_of(client, agent["id"], a), await prompt_of(client, copy_id, b)
        again = await call(client, "GET", f"/v1/agents/{copy_id}/export", b)

    [source], [entry] = file["sources"], file["agents"]
    assert set(source) <= LETTA_SOURCE_FIELDS and all(set(f) <= LETTA_FILE_FIELDS for f in file["files"])
    assert all(set(view) <= LETTA_FILE_AGENT_FIELDS for view in entry["files_agents"])
    assert source["id"] == "source-0" and entry["source_ids"] == ["source-0"] and entry["max_files_open"] == 3
    assert source["embedding_config"]["embedding_chunk_size"] == 20 and source["embedding_config"]["embedding_dim"] == 384
    assert [(f["id"], f["file_name"], f["source_id"]) for f in file["files"]] == [
        ("file-0", "docs/notes.txt", "source-0"),
        ("file-1", "docs/guide.md", "source-0"),
    ]
    assert file["files"][0]["content"] == NOTES.decode() and file["files"][0]["processing_status"] == "completed"
    assert [(v["id"], v["file_id"], v["is_open"], v["start_line"], v["end_line"]) for v in entry["files_agents"]] == [
        ("file_agent-0", "file-0", True, 11, 15),
        ("file_agent-1", "file-1", False, None, None),
    ]

    assert result["skipped"] == [] and copy["max_files_open"] == 3
    assert (copied_folder["name"], copied_folder["description"], copied_folder["instructions"]) == (
        "docs", "Project notes", "Cite lines.",
    )  # fmt: skip
    assert copied_folder["embedding_config"]["embedding_chunk_size"] == 20 and copied_folder["id"] != folder["id"]
    assert {name: (f["processing_status"], f["total_chunks"], f["chunks_embedded"]) for name, f in copied.items()} == {
        "notes.txt": ("embedding", 40, 0),
        "guide.md": ("embedding", 1, 0),
    }
    assert copied["notes.txt"]["content"] == NOTES.decode() and copied["notes.txt"]["id"] not in (notes_id, guide_id)
    assert len(chunks) == 41 and all(chunk["waiting"] for chunk in chunks)  # the chunks are made again, without vectors
    assert tuple(chunks[10]) == (11, 11, "note 11: something worth reading", True)
    assert {name: (f["processing_status"], f["chunks_embedded"]) for name, f in processed.items()} == {
        "notes.txt": ("completed", 40),
        "guide.md": ("completed", 1),
    }
    assert copied_views == original_views
    assert copied_views["docs/notes.txt"][:3] == (True, 11, 15) and copied_views["docs/guide.md"] == (False, None, None, None)
    assert "11: note 11: something worth reading" in copied_prompt and "16: note 16" not in copied_prompt
    assert _without_ids(original_prompt, agent["id"]) == _without_ids(copied_prompt, copy_id)
    assert {tool["name"] for tool in copy["tools"]} >= {"open_files", "grep_files", "semantic_search_files"}
    assert _same_views(again, file)  # but for when each view was last used


def _without_ids(prompt: str, agent_id: str) -> str:
    return re.sub(r"System prompt last recompiled: .*", "", prompt.replace(agent_id, "<agent>"))


def _same_views(first: dict, second: dict) -> bool:
    """The views of two exports but for when each was last used."""

    def shown(file: dict) -> list:
        return [{k: v for k, v in view.items() if k != "last_accessed_at"} for view in file["agents"][0]["files_agents"]]

    return shown(first) == shown(second)


def letta_file(**agent_fields) -> dict:
    """The real Letta 0.16.8 export, given a folder as Letta exports one: its source (Letta's OpenAI
    embedding), a file it read (Windows line ends) and one it could not, and the agent's views."""
    file = json.loads((FIXTURES / "letta-0.16.8-sample.af").read_text())
    embedding = {"embedding_endpoint_type": "openai", "embedding_model": "text-embedding-3-small", "embedding_dim": 1536}
    file["sources"] = [
        {
            "id": "source-0",
            "name": "letta-docs",
            "description": "Docs from Letta",
            "instructions": "Quote the guide.",
            "metadata": {"team": "docs"},
            "embedding_config": embedding | {"embedding_chunk_size": 300, "handle": "openai/text-embedding-3-small"},
        }
    ]
    common = {"source_id": "source-0", "file_path": None, "file_creation_date": None, "file_last_modified_date": None}
    file["files"] = [
        common
        | {"id": "file-0", "file_name": "letta-docs/guide.md", "original_file_name": "guide.md", "file_type": "text/markdown"}
        | {"file_size": 39, "processing_status": "completed", "error_message": None, "total_chunks": 1, "chunks_embedded": 1}
        | {"content": "# Guide\r\n\r\nStep one.\r\nStep two.\r\n"},
        common
        | {"id": "file-1", "file_name": "letta-docs/scan.pdf", "original_file_name": "scan.pdf", "file_type": "application/pdf"}
        | {"file_size": 5000, "processing_status": "error", "error_message": "No text extracted from PDF", "content": None}
        | {"total_chunks": None, "chunks_embedded": None},
    ]
    views = [
        {"id": f"file_agent-{i}", "agent_id": "agent-0", "file_id": f"file-{i}", "source_id": "source-0", "is_open": True}
        | {"file_name": f["file_name"], "visible_content": f["content"], "last_accessed_at": "2026-11-30T11:00:00Z"}
        for i, f in enumerate(file["files"])
    ]
    file["agents"][0] |= {"source_ids": ["source-0"], "files_agents": views} | agent_fields
    return file


async def test_a_letta_shaped_folder_imports_with_its_views_and_a_taken_name_gets_a_suffix(settings, sessionmaker):
    async with app_client(settings) as client:
        [a] = await organization_keys(client, ADMIN, "a")
        first = await import_file(client, letta_file(), a)
        second = await import_file(client, letta_file(), a)
        [agent_id], [twin_id] = first["agent_ids"], second["agent_ids"]
        [folder] = await call(client, "GET", f"/v1/agents/{agent_id}/folders", a)
        [twin_folder] = await call(client, "GET", f"/v1/agents/{twin_id}/folders", a)
        files = await files_of(client, folder["id"], a)
        twin_files = await files_of(client, twin_folder["id"], a)
        views, twin_views = await views_of(client, agent_id, a), await views_of(client, twin_id, a)
        prompt = await prompt_of(client, agent_id, a)
        await process_files(sessionmaker)
        guide = (await files_of(client, folder["id"], a))["guide.md"]

    assert (folder["name"], folder["description"], folder["instructions"], folder["metadata"]) == (
        "letta-docs", "Docs from Letta", "Quote the guide.", {"team": "docs"},
    )  # fmt: skip
    assert folder["embedding_config"]["handle"] == "local/all-MiniLM-L6-v2"  # Letta's vectors are not in the file
    assert any("source source-0: embedding 'openai/text-embedding-3-small' replaced" in note for note in first["notes"])
    assert {name: (f["processing_status"], f["file_type"], f["error_message"]) for name, f in files.items()} == {
        "guide.md": ("embedding", "text/markdown", None),
        "scan.pdf": ("error", "application/pdf", "No text extracted from PDF (before it was exported); upload the file again."),
    }
    assert files["guide.md"]["content"] == "# Guide\n\nStep one.\nStep two.\n"
    assert views == {
        "letta-docs/guide.md": (True, 1, 4, "[Viewing file start (out of 4 lines)]\n1: # Guide\n2: \n3: Step one.\n4: Step two.")
    }
    assert any("file-1 has no text" in note for note in first["notes"])
    assert '<file status="open" name="letta-docs/guide.md">' in prompt and "3: Step one." in prompt
    assert re.fullmatch(r"letta-docs_[0-9a-f]{8}", twin_folder["name"])
    assert any(f"imported as {twin_folder['name']!r}" in note for note in second["notes"])
    assert sorted(twin_files) == ["guide.md", "scan.pdf"] and list(twin_views) == [f"{twin_folder['name']}/guide.md"]
    assert (guide["processing_status"], guide["total_chunks"], guide["chunks_embedded"]) == ("completed", 1, 1)


async def test_a_file_whose_folders_and_views_name_what_it_does_not_hold_is_refused_whole(settings, db):
    file = letta_file()
    file["files"][1]["source_id"] = "source-9"
    file["agents"][0]["source_ids"] = ["source-0", "source-3"]
    file["agents"][0]["files_agents"].append({"file_id": "file-7", "is_open": True})
    before = {table: await db.fetchval(f"SELECT count(*) FROM {table}") for table in TABLES}

    async with app_client(settings) as client:
        [a] = await organization_keys(client, ADMIN, "a")
        response = await client.post(
            "/v1/agents/import", files={"file": ("agent.af", json.dumps(file).encode(), "application/json")}, headers=a
        )

    problems = response.json().get("problems", [])
    assert response.status_code == 400, response.text
    assert problems == [
        "file file-1: source_id names a source the file does not contain: source-9.",
        "agent agent-0 ('sample-editor'): source_ids names sources the file does not contain: source-3.",
        "agent agent-0 ('sample-editor'): files_agents[1]: file-1 is a file of source-9, which is not in the agent's "
        "source_ids; add it there or drop the entry.",
        "agent agent-0 ('sample-editor'): files_agents[2]: file_id names a file the file does not contain: file-7.",
    ]
    assert {table: await db.fetchval(f"SELECT count(*) FROM {table}") for table in TABLES} == before


async def test_text_postgresql_cannot_store_is_a_problem_in_names_and_an_error_in_a_file_s_content(settings):
    bad_names = letta_file()
    bad_names["sources"][0]["description"] = "nul\u0000here"
    bad_names["files"][1]["original_file_name"] = "scan\u0000.pdf"
    bad_content = letta_file()
    bad_content["files"][0]["content"] = "fine\nbinary\u0000junk\n"

    async with app_client(settings) as client:
        [a] = await organization_keys(client, ADMIN, "a")
        refused = await client.post(
            "/v1/agents/import", files={"file": ("agent.af", json.dumps(bad_names).encode(), "application/json")}, headers=a
        )
        [agent_id] = (await import_file(client, bad_content, a))["agent_ids"]
        [folder] = await call(client, "GET", f"/v1/agents/{agent_id}/folders", a)
        guide = (await files_of(client, folder["id"], a))["guide.md"]
        views = await views_of(client, agent_id, a)

    assert refused.status_code == 400, refused.text
    assert refused.json()["problems"] == [
        "source source-0 ('letta-docs'): it holds a NUL character, which cannot be stored.",
        "file file-1: it holds a NUL character outside its content, which cannot be stored.",
    ]
    assert (guide["processing_status"], guide["error_message"], guide["content"]) == (
        "error", "the file has a NUL character on line 2: it looks like a binary file, not text.", None,
    )  # fmt: skip
    assert views == {}
