"""An agent's files over HTTP (letta-client's agents.files): attaching a folder opens its processed
files up to max_files_open, opening more closes the least recently used, and the compiled prompt
shows each open file's window with the file's own line numbers. Files are stored here already
processed (status completed, text set), without the upload worker."""

from letta_client.types.agent_state import Memory
from letta_client.types.agents import FileListResponse
from pydantic import SecretStr
from sqlalchemy import text

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.tenancy import owned
from memvm.db.uow import transaction
from memvm.files import views
from memvm.ids import new_id
from memvm.orm import FolderFile
from tests.support.api import app_client, create_agent, organization_keys

GUIDE = "# Guide\n\nStep one.\nStep two.\n"
GUIDE_WINDOW = "[Viewing file start (out of 4 lines)]\n1: # Guide\n2: \n3: Step one.\n4: Step two."
UNKNOWN_FILE = "file-00000000-0000-4000-8000-000000000000"


async def stored_file(sessionmaker, folder: dict, name: str, content: str | None, *, organization=DEFAULT_ORGANIZATION_ID) -> str:
    """A file of the folder as the worker leaves it: `content` None is one still being parsed."""
    file_id = new_id("file")
    async with transaction(sessionmaker, organization) as session:
        session.add(
            FolderFile(
                id=file_id,
                folder_id=folder["id"],
                file_name=f"{folder['name']}/{name}",
                original_file_name=name,
                file_type="text/markdown",
                file_size=len(content or ""),
                content=content,
                line_count=None if content is None else len(content.splitlines()),
                processing_status="parsing" if content is None else "completed",
            )
        )
    return file_id


async def folder_with_files(client, sessionmaker, *names: str, **headers) -> tuple[dict, dict[str, str]]:
    """A folder "docs" with a processed file per name (in that order) and one still being parsed."""
    body = {"name": "docs", "description": "Project documents", "instructions": "Cite file and line."}
    folder = (await client.post("/v1/folders/", json=body, headers=headers)).json()
    ids = {
        name: await stored_file(sessionmaker, folder, name, GUIDE if name == "guide.md" else f"{name} text\n") for name in names
    }
    ids["pending.md"] = await stored_file(sessionmaker, folder, "pending.md", None)
    return folder, ids


async def compiled_prompt(client, agent_id: str) -> str:
    """The prompt as stored (what the model is sent), not compiled afresh for the asking."""
    response = await client.get(f"/v1/agents/{agent_id}/context")
    assert response.status_code == 200, response.text
    return response.json()["system_prompt"]


async def attach(client, agent: dict, folder: dict, **headers) -> None:
    response = await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{folder['id']}", headers=headers)
    assert response.status_code == 200, response.text


async def listed(client, agent: dict, **params) -> dict:
    response = await client.get(f"/v1/agents/{agent['id']}/files", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def open_names(client, agent: dict) -> list[str]:
    return sorted(f["file_name"] for f in (await listed(client, agent, is_open="true"))["files"])


async def test_attaching_a_folder_gives_the_agent_its_processed_files_open_up_to_its_limit(client, sessionmaker):
    agent = await create_agent(client, max_files_open=2)
    folder, ids = await folder_with_files(client, sessionmaker, "guide.md", "b.md", "c.md")

    await attach(client, agent, folder)

    page = await listed(client, agent, order="asc")
    assert [(f["file_name"], f["is_open"]) for f in page["files"]] == [
        ("docs/guide.md", True),
        ("docs/b.md", True),
        ("docs/c.md", False),
    ]
    guide = page["files"][0]
    assert guide == {
        "id": guide["id"],
        "file_id": ids["guide.md"],
        "file_name": "docs/guide.md",
        "folder_id": folder["id"],
        "folder_name": "docs",
        "is_open": True,
        "start_line": 1,
        "end_line": 4,
        "last_accessed_at": guide["last_accessed_at"],
        "visible_content": GUIDE_WINDOW,
    }
    assert guide["id"].startswith("file_agent-") and page["has_more"] is False and page["next_cursor"] is None
    assert FileListResponse.model_validate(guide).visible_content == GUIDE_WINDOW  # the SDK's shape
    assert [f["file_name"] for f in (await listed(client, agent, is_open="false"))["files"]] == ["docs/c.md"]


async def test_the_prompt_shows_each_open_file_s_window_and_counts_the_files(client, sessionmaker):
    agent = await create_agent(client, max_files_open=1)
    folder, _ = await folder_with_files(client, sessionmaker, "guide.md", "b.md")

    await attach(client, agent, folder)

    prompt = await compiled_prompt(client, agent["id"])
    assert (
        "<directories>\n<file_limits>\n- current_files_open=1\n- max_files_open=1\n</file_limits>\n"
        '<directory name="docs">\n<description>Project documents</description>\n'
        "<instructions>Cite file and line.</instructions>\n"
        '<file status="closed" name="docs/b.md">\n<metadata>\n- read_only=true\n- chars_current=0\n- chars_limit=50000\n'
        "- total_lines=1\n</metadata>\n</file>\n"
        '<file status="open" name="docs/guide.md">\n<metadata>\n- read_only=true\n- chars_current=78\n- chars_limit=50000\n'
        f"- lines_in_view=1-4\n- total_lines=4\n</metadata>\n<value>\n{GUIDE_WINDOW}\n</value>\n</file>\n"
        "</directory>\n</directories>\n\n<memory_metadata>"
    ) in prompt
    assert "- 1 of 2 files in your directories are open (use open_files, grep_files, semantic_search_files)" in prompt
    state = (await client.get(f"/v1/agents/{agent['id']}")).json()
    assert (state["max_files_open"], state["per_file_view_window_char_limit"]) == (1, 50_000)
    blocks = Memory.model_validate(state["memory"]).file_blocks or []  # the SDK's shape
    assert [(b.label, b.is_open, b.value, b.limit) for b in blocks] == [
        ("docs/b.md", False, "", 50_000),
        ("docs/guide.md", True, GUIDE_WINDOW, 50_000),
    ]


async def test_opening_closes_the_least_recently_used_and_answers_their_names(client, sessionmaker):
    agent = await create_agent(client, max_files_open=2)
    folder, ids = await folder_with_files(client, sessionmaker, "guide.md", "b.md", "c.md")
    await attach(client, agent, folder)  # guide.md, then b.md opened
    base = f"/v1/agents/{agent['id']}/files"

    assert (await client.patch(f"{base}/{ids['c.md']}/open")).json() == ["docs/guide.md"]
    assert await open_names(client, agent) == ["docs/b.md", "docs/c.md"]
    assert (await client.patch(f"{base}/{ids['guide.md']}/open")).json() == ["docs/b.md"]
    assert (await client.patch(f"{base}/{ids['guide.md']}/open")).json() == []  # already open: nothing to close

    closed = await client.patch(f"{base}/{ids['c.md']}/close")
    assert closed.json() == {"message": f"File id={ids['c.md']} successfully closed"}
    assert await open_names(client, agent) == ["docs/guide.md"]
    assert GUIDE_WINDOW in await compiled_prompt(client, agent["id"])
    assert (await client.patch(f"{base}/close-all")).json() == ["docs/guide.md"]
    assert await open_names(client, agent) == []
    assert '<file status="open"' not in await compiled_prompt(client, agent["id"])


async def test_a_smaller_view_cuts_the_window_at_a_whole_line_and_says_how_to_read_on(client, sessionmaker):
    agent = await create_agent(client, per_file_view_window_char_limit=500)
    folder = (await client.post("/v1/folders/", json={"name": "logs"})).json()
    await stored_file(sessionmaker, folder, "app.log", "".join(f"event {n}\n" for n in range(1, 101)))

    await attach(client, agent, folder)

    [view] = (await listed(client, agent))["files"]
    assert view["visible_content"].startswith("[Viewing lines 1 to 27 (out of 100 lines)]\n1: event 1\n")
    assert view["visible_content"].endswith(
        "\n27: event 27\n...[TRUNCATED] Lines 28 to 100 did not fit in this file's view (500 characters); "
        "to read on, call open_files with offset=27."
    )
    assert (view["start_line"], view["end_line"]) == (1, 27)
    updated = await client.patch(f"/v1/agents/{agent['id']}", json={"per_file_view_window_char_limit": 600})
    assert updated.json()["per_file_view_window_char_limit"] == 600
    [view] = (await listed(client, agent))["files"]
    # The same lines as before, which now fit: no note any more.
    assert view["visible_content"].startswith("[Viewing lines 1 to 27 (out of 100 lines)]\n1: event 1\n")
    assert view["visible_content"].endswith("\n27: event 27")
    assert f"<value>\n{view['visible_content']}\n</value>" in await compiled_prompt(client, agent["id"])


async def test_detaching_the_folder_takes_its_files_out_of_view(client, sessionmaker):
    agent = await create_agent(client)
    folder, _ = await folder_with_files(client, sessionmaker, "guide.md")
    await attach(client, agent, folder)

    detached = await client.patch(f"/v1/agents/{agent['id']}/folders/detach/{folder['id']}")

    assert detached.status_code == 200
    assert (await listed(client, agent))["files"] == []
    prompt = await compiled_prompt(client, agent["id"])
    assert "<directories>" not in prompt and "files in your directories" not in prompt


async def test_deleting_the_folder_takes_it_out_of_the_prompt(client, sessionmaker):
    agent = await create_agent(client)
    folder, _ = await folder_with_files(client, sessionmaker, "guide.md")
    await attach(client, agent, folder)

    assert (await client.delete(f"/v1/folders/{folder['id']}")).status_code == 200

    assert (await listed(client, agent))["files"] == []
    assert "<directories>" not in await compiled_prompt(client, agent["id"])


async def test_pages_follow_the_cursor_both_ways(client, sessionmaker):
    agent = await create_agent(client)
    folder, _ = await folder_with_files(client, sessionmaker, "a.md", "b.md", "c.md")
    await attach(client, agent, folder)

    first = await listed(client, agent, limit=2, order="asc")
    second = await listed(client, agent, limit=2, order="asc", after=first["next_cursor"])
    back = await listed(client, agent, limit=1, order="asc", before=second["files"][0]["id"])

    assert [f["file_name"] for f in first["files"]] == ["docs/a.md", "docs/b.md"] and first["has_more"] is True
    assert first["next_cursor"] == first["files"][-1]["id"]
    assert [f["file_name"] for f in second["files"]] == ["docs/c.md"] and second["has_more"] is False
    assert [f["file_name"] for f in back["files"]] == ["docs/b.md"] and back["has_more"] is True
    newest = await listed(client, agent, limit=1)
    assert [f["file_name"] for f in newest["files"]] == ["docs/c.md"]


async def test_files_the_agent_cannot_see_are_a_4xx_that_says_why(client, sessionmaker):
    agent = await create_agent(client)
    folder, ids = await folder_with_files(client, sessionmaker, "guide.md")
    other = (await client.post("/v1/folders/", json={"name": "other"})).json()
    elsewhere = await stored_file(sessionmaker, other, "x.md", "x\n")
    base = f"/v1/agents/{agent['id']}/files"

    before_attach = await client.patch(f"{base}/{ids['guide.md']}/open")
    await attach(client, agent, folder)
    pending = await client.patch(f"{base}/{ids['pending.md']}/open")
    not_attached = await client.patch(f"{base}/{elsewhere}/close")
    unknown = await client.patch(f"{base}/{UNKNOWN_FILE}/open")
    malformed = await client.patch(f"{base}/close-everything/open")

    assert before_attach.status_code == 404 and "attach its folder" in before_attach.json()["detail"]
    assert pending.status_code == 409 and ids["pending.md"] in pending.json()["detail"]
    assert not_attached.status_code == 404 and "not in a folder attached" in not_attached.json()["detail"]
    assert unknown.status_code == 404 and UNKNOWN_FILE in unknown.json()["detail"]
    assert malformed.status_code == 422


async def test_bad_file_limits_are_a_422_naming_the_field_and_change_nothing(client):
    agent = await create_agent(client)
    for body in ({"max_files_open": 0}, {"max_files_open": 1001}, {"per_file_view_window_char_limit": 10}):
        created = await client.post("/v1/agents/", json={"name": "x", **body})
        updated = await client.patch(f"/v1/agents/{agent['id']}", json=body)
        assert (created.status_code, updated.status_code) == (422, 422)
        assert next(iter(body)) in created.text and next(iter(body)) in updated.text
    state = (await client.get(f"/v1/agents/{agent['id']}")).json()
    assert (state["max_files_open"], state["per_file_view_window_char_limit"]) == (5, 50_000)


async def test_another_organization_s_agent_files_are_a_404(settings, sessionmaker):
    admin = "admin-secret-for-tests"
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(admin)})) as client:
        key_a, key_b = await organization_keys(client, admin, "a", "b")
        agent = (await client.post("/v1/agents/", json={}, headers=key_a)).json()
        organization_a = await _organization_of(sessionmaker, agent["id"])
        folder = (await client.post("/v1/folders/", json={"name": "docs"}, headers=key_a)).json()
        file_id = await stored_file(sessionmaker, folder, "a.md", "a\n", organization=organization_a)
        await attach(client, agent, folder, **key_a)
        base = f"/v1/agents/{agent['id']}/files"

        answers = [
            await client.get(base, headers=key_b),
            await client.patch(f"{base}/{file_id}/open", headers=key_b),
            await client.patch(f"{base}/{file_id}/close", headers=key_b),
            await client.patch(f"{base}/close-all", headers=key_b),
        ]

        assert [answer.status_code for answer in answers] == [404, 404, 404, 404]
        still = (await client.get(base, params={"is_open": "true"}, headers=key_a)).json()
        assert [f["file_id"] for f in still["files"]] == [file_id]


async def _organization_of(sessionmaker, agent_id: str) -> str:
    async with sessionmaker() as session:
        return (await session.execute(text("SELECT organization_id FROM agent WHERE id = :id"), {"id": agent_id})).scalar_one()


async def test_a_file_processed_after_the_attach_is_opened_for_every_agent_of_its_folder(client, sessionmaker):
    agents = [await create_agent(client), await create_agent(client)]
    folder, _ = await folder_with_files(client, sessionmaker)
    for agent in agents:
        await attach(client, agent, folder)
    file_id = await stored_file(sessionmaker, folder, "guide.md", GUIDE)

    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:  # as the worker stores a parse: in its organization
        await views.show_new_file(session, await owned(session, FolderFile, file_id))

    for agent in agents:
        assert [(f["file_id"], f["visible_content"]) for f in (await listed(client, agent))["files"]] == [(file_id, GUIDE_WINDOW)]
        assert f"<value>\n{GUIDE_WINDOW}\n</value>" in await compiled_prompt(client, agent["id"])

    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:  # as deleting the file does first
        await views.forget_files(session, [file_id])

    for agent in agents:
        assert (await listed(client, agent))["files"] == []
        assert "docs/guide.md" not in await compiled_prompt(client, agent["id"])


async def test_a_file_used_by_a_search_is_the_last_to_be_closed(client, sessionmaker):
    agent = await create_agent(client, max_files_open=2)
    folder, ids = await folder_with_files(client, sessionmaker, "guide.md", "b.md", "c.md")
    await attach(client, agent, folder)  # guide.md, then b.md opened: guide.md is the least recently used

    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        await views.touch(session, agent["id"], [ids["guide.md"]])

    assert (await client.patch(f"/v1/agents/{agent['id']}/files/{ids['c.md']}/open")).json() == ["docs/b.md"]
