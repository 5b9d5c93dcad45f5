"""A folder's files over HTTP: upload (answered at once, before any parsing), duplicates, the size and
type checks, list, retrieve and delete. The app here runs no background workers, so what the routes
store is what the tests see; processing is in tests/search/test_file_processing.py."""

import asyncio
import re

import httpx
import pytest
from letta_client.types.folders import FileListResponse, FileRetrieveResponse, FileUploadResponse
from pydantic import SecretStr

from memvm.files.processing import process_next
from memvm.ids import id_pattern
from tests.support.api import app_client, organization_keys

UNKNOWN_FILE = "file-00000000-0000-4000-8000-000000000000"
MAX_UPLOAD = 4096


@pytest.fixture
def settings(settings):
    """No workers: the rows stay as the routes left them. A small upload cap for the 413s."""
    return settings.model_copy(update={"embedding_worker": False, "max_file_upload_bytes": MAX_UPLOAD})


async def new_folder(client, name="docs", **headers) -> str:
    response = await client.post("/v1/folders/", json={"name": name}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["id"]


async def upload(client, folder_id, filename="guide.md", data=b"# Guide\nline two\n", content_type="text/markdown", **params):
    files = {"file": (filename, data, content_type)}
    return await client.post(f"/v1/folders/{folder_id}/upload", files=files, params=params)


async def uploaded(client, folder_id, filename="guide.md", data=b"# Guide\nline two\n", **params) -> dict:
    response = await upload(client, folder_id, filename, data, **params)
    assert response.status_code == 200, response.text
    return response.json()


async def file_rows(db) -> list[tuple]:
    rows = await db.fetch(
        "SELECT id, file_name, original_file_name, processing_status, file_size FROM folder_file ORDER BY created_at"
    )
    return [tuple(row) for row in rows]


async def test_an_upload_is_answered_at_once_with_status_parsing(client, db):
    folder_id = await new_folder(client)

    response = await upload(client, folder_id, data=b"# Guide\r\nline two\r\n")

    assert response.status_code == 200, response.text
    answer = response.json()
    FileUploadResponse.model_validate(answer)
    assert re.fullmatch(id_pattern("file"), answer["id"])
    assert {key: answer[key] for key in answer if key not in ("id", "created_at", "updated_at")} == {
        "source_id": folder_id,
        "file_name": "docs/guide.md",  # as agents will name it
        "original_file_name": "guide.md",
        "file_path": None,
        "file_type": "text/markdown",
        "file_size": 19,
        "processing_status": "parsing",
        "error_message": None,
        "total_chunks": None,
        "chunks_embedded": None,
        "content": None,
        "file_creation_date": None,
        "file_last_modified_date": None,
    }
    raw = await db.fetchval("SELECT raw FROM folder_file WHERE id = $1", answer["id"])
    assert raw == b"# Guide\r\nline two\r\n"  # stored as it came, for the worker


async def test_duplicates_get_a_suffix_by_default(client, db):
    folder_id = await new_folder(client)

    names = [(await uploaded(client, folder_id, "notes.txt"))["file_name"] for _ in range(3)]
    other = await uploaded(client, folder_id, "other.txt")

    assert names == ["docs/notes.txt", "docs/notes_(1).txt", "docs/notes_(2).txt"]
    assert other["file_name"] == "docs/other.txt"
    assert [row[2] for row in await file_rows(db)] == ["notes.txt"] * 3 + ["other.txt"]


async def test_a_suffix_takes_the_first_free_number(client, db):
    folder_id = await new_folder(client)
    files = [await uploaded(client, folder_id, "notes.txt") for _ in range(3)]
    assert (await client.delete(f"/v1/folders/{folder_id}/{files[1]['id']}")).status_code == 204

    again = await uploaded(client, folder_id, "notes.txt", duplicate_handling="suffix")

    assert again["file_name"] == "docs/notes_(1).txt"


async def test_concurrent_uploads_of_one_name_each_get_their_own(client, db):
    folder_id = await new_folder(client)

    answers = await asyncio.gather(*(upload(client, folder_id, "notes.txt") for _ in range(5)))

    assert [answer.status_code for answer in answers] == [200] * 5
    assert sorted(answer.json()["file_name"] for answer in answers) == [
        "docs/notes.txt",
        *(f"docs/notes_({n}).txt" for n in range(1, 5)),
    ]


async def test_skip_answers_the_file_already_there(client, db):
    folder_id = await new_folder(client)
    first = await uploaded(client, folder_id)
    before = await file_rows(db)

    response = await upload(client, folder_id, data=b"other text", duplicate_handling="skip")

    assert response.status_code == 200 and response.headers["x-upload-result"] == "skipped"
    assert response.json() == first
    assert await file_rows(db) == before


async def test_error_refuses_a_duplicate_naming_file_and_folder(client, db):
    folder_id = await new_folder(client, "handbook")
    await uploaded(client, folder_id)
    before = await file_rows(db)

    response = await upload(client, folder_id, data=b"other text", duplicate_handling="error")

    assert response.status_code == 409
    assert "'guide.md' already exists in folder 'handbook'" in response.json()["detail"]
    assert await file_rows(db) == before
    fresh = await upload(client, folder_id, "new.md", duplicate_handling="error")
    assert fresh.status_code == 200 and fresh.json()["file_name"] == "handbook/new.md"


async def test_replace_deletes_the_old_file_and_takes_its_name(client, db, sessionmaker):
    folder_id = await new_folder(client)
    old = await uploaded(client, folder_id, data=b"old text\n")
    assert await process_next(sessionmaker) == 1  # the old file has chunks now

    new = await uploaded(client, folder_id, data=b"new text\n", duplicate_handling="replace")

    assert new["id"] != old["id"] and new["file_name"] == old["file_name"] == "docs/guide.md"
    assert [row[0] for row in await file_rows(db)] == [new["id"]]
    assert await db.fetchval("SELECT count(*) FROM file_chunk") == 0
    assert (await client.get(f"/v1/folders/{folder_id}/files/{old['id']}")).status_code == 404


async def test_a_named_upload_is_stored_under_that_name(client):
    folder_id = await new_folder(client)

    answer = await uploaded(client, folder_id, "tmp_upload_123.md", name="design notes.md")

    assert (answer["file_name"], answer["original_file_name"]) == ("docs/design notes.md", "design notes.md")
    assert answer["file_type"] == "text/markdown"  # read as what was uploaded


@pytest.mark.parametrize(
    ("filename", "content_type", "params", "status", "named"),
    [
        ("photo.png", "image/png", {}, 415, ".md"),  # the supported extensions are listed
        (".env", "text/plain", {}, 400, "'.env'"),
        ("guide.md", "text/markdown", {"duplicate_handling": "overwrite"}, 422, "duplicate_handling"),
        ("guide.md", "text/markdown", {"name": "x" * 256}, 422, "name"),
    ],
)
async def test_bad_uploads_are_refused_and_store_nothing(client, db, filename, content_type, params, status, named):
    folder_id = await new_folder(client)

    response = await upload(client, folder_id, filename, b"text", content_type, **params)

    assert response.status_code == status, response.text
    assert named in response.json()["detail"]
    assert await file_rows(db) == []


async def test_a_file_over_the_cap_is_413_however_it_is_sent(client, db):
    folder_id = await new_folder(client)
    url = f"/v1/folders/{folder_id}/upload"
    envelope = httpx.Request("POST", "http://x", files={"file": ("big.txt", b"x" * (MAX_UPLOAD + 1))})
    body = envelope.read()

    async def streamed():  # no Content-Length: the cap is checked as the body arrives
        yield body[: len(body) // 2]
        yield body[len(body) // 2 :] + b"\0" * (70 * 1024)

    answers = {
        "file over the cap": await upload(client, folder_id, "big.txt", b"x" * (MAX_UPLOAD + 1), "text/plain"),
        "body over the cap": await upload(client, folder_id, "big.txt", b"x" * (MAX_UPLOAD + 70 * 1024), "text/plain"),
        "streamed": await client.post(url, content=streamed(), headers={"content-type": envelope.headers["content-type"]}),
    }
    exactly = await upload(client, folder_id, "fits.txt", b"x" * MAX_UPLOAD, "text/plain")

    assert {name: answer.status_code for name, answer in answers.items()} == dict.fromkeys(answers, 413)
    assert all("MEMVM_MAX_FILE_UPLOAD_BYTES" in answer.json()["detail"] for answer in answers.values())
    assert f"The file is {MAX_UPLOAD + 1} bytes" in answers["file over the cap"].json()["detail"]
    # Larger bodies are refused before they are read whole: as declared, or as they stream in.
    assert all("The request body is larger than" in answers[name].json()["detail"] for name in ("body over the cap", "streamed"))
    assert exactly.status_code == 200
    assert [row[1] for row in await file_rows(db)] == ["docs/fits.txt"]


async def test_list_and_retrieve_with_and_without_content(client, sessionmaker):
    folder_id = await new_folder(client)
    read = await uploaded(client, folder_id, "read.md", b"# Read\ntext\n")
    assert await process_next(sessionmaker) == 1
    waiting = await uploaded(client, folder_id, "waiting.md")
    base = f"/v1/folders/{folder_id}/files"

    listed = (await client.get(base)).json()
    with_content = (await client.get(base, params={"include_content": "true"})).json()
    page = (await client.get(base, params={"limit": 1, "after": waiting["id"]})).json()
    one = (await client.get(f"{base}/{read['id']}")).json()
    one_with_content = (await client.get(f"{base}/{read['id']}", params={"include_content": "true"})).json()

    for item in [*listed, *with_content]:
        FileListResponse.model_validate(item)
    FileRetrieveResponse.model_validate(one_with_content)
    assert [item["id"] for item in listed] == [waiting["id"], read["id"]]  # newest first
    assert [item["file_name"] for item in listed] == ["waiting.md", "read.md"]  # Letta drops the folder here
    assert [item["content"] for item in listed] == [None, None]
    assert [item["content"] for item in with_content] == [None, "# Read\ntext\n"]
    assert [item["id"] for item in page] == [read["id"]]
    assert one["processing_status"] == "embedding" and one["total_chunks"] == 1 and one["chunks_embedded"] == 0
    assert one["content"] is None and one_with_content["content"] == "# Read\ntext\n"


async def test_delete_is_at_folder_slash_file_and_takes_the_chunks(client, db, sessionmaker):
    docs, notes = await new_folder(client), await new_folder(client, "notes")
    file = await uploaded(client, docs)
    assert await process_next(sessionmaker) == 1

    wrong_folder = await client.delete(f"/v1/folders/{notes}/{file['id']}")
    deleted = await client.delete(f"/v1/folders/{docs}/{file['id']}")
    again = await client.delete(f"/v1/folders/{docs}/{file['id']}")

    assert wrong_folder.status_code == 404 and file["id"] in wrong_folder.json()["detail"]
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert again.status_code == 404
    assert await file_rows(db) == [] and await db.fetchval("SELECT count(*) FROM file_chunk") == 0


async def test_deleting_a_folder_deletes_its_files_and_chunks(client, db, sessionmaker):
    folder_id = await new_folder(client)
    await uploaded(client, folder_id)
    assert await process_next(sessionmaker) == 1

    assert (await client.delete(f"/v1/folders/{folder_id}")).status_code == 200

    assert await file_rows(db) == [] and await db.fetchval("SELECT count(*) FROM file_chunk") == 0


async def test_unknown_folders_and_files_are_404(client, db):
    folder_id = await new_folder(client)
    unknown_folder = "source-00000000-0000-4000-8000-000000000000"

    answers = [
        await upload(client, unknown_folder),
        await client.get(f"/v1/folders/{unknown_folder}/files"),
        await client.get(f"/v1/folders/{folder_id}/files/{UNKNOWN_FILE}"),
        await client.delete(f"/v1/folders/{folder_id}/{UNKNOWN_FILE}"),
        await client.get(f"/v1/folders/{folder_id}/files", params={"after": UNKNOWN_FILE}),
    ]

    assert [answer.status_code for answer in answers] == [404] * 5
    assert await file_rows(db) == []


async def test_another_organization_gets_404_on_every_file_route(settings, db):
    admin = "admin-secret-for-tests"
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(admin)})) as client:
        key_a, key_b = await organization_keys(client, admin, "a", "b")
        folder_a, folder_b = await new_folder(client, **key_a), await new_folder(client, **key_b)
        files = {"file": ("guide.md", b"# Guide\n", "text/markdown")}
        file_a = (await client.post(f"/v1/folders/{folder_a}/upload", files=files, headers=key_a)).json()
        file_b = (await client.post(f"/v1/folders/{folder_b}/upload", files=files, headers=key_b)).json()
        before = await file_rows(db)

        answers = {
            "upload": await client.post(f"/v1/folders/{folder_a}/upload", files=files, headers=key_b),
            "list": await client.get(f"/v1/folders/{folder_a}/files", headers=key_b),
            "retrieve": await client.get(f"/v1/folders/{folder_a}/files/{file_a['id']}", headers=key_b),
            "retrieve in own folder": await client.get(f"/v1/folders/{folder_b}/files/{file_a['id']}", headers=key_b),
            "delete": await client.delete(f"/v1/folders/{folder_a}/{file_a['id']}", headers=key_b),
            "delete in own folder": await client.delete(f"/v1/folders/{folder_b}/{file_a['id']}", headers=key_b),
            "own file in A's folder": await client.delete(f"/v1/folders/{folder_a}/{file_b['id']}", headers=key_b),
        }

        assert {name: answer.status_code for name, answer in answers.items()} == dict.fromkeys(answers, 404)
        assert await file_rows(db) == before
