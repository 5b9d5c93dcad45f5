"""Folders (Letta's sources) through the official SDK against a real `memvm serve`: every folder
method of letta-client 1.12.1, their files (uploaded, then read and embedded by the server's worker
process), attaching folders to agents, and the agent's `sources`; then issue 27's acceptance test: a
PDF, a Markdown file and a 5 MB log read by the agent's file tools in one turn. Bad input is in
tests/api/test_folders.py and tests/api/test_folder_files.py."""

import asyncio
import time

import pytest
from letta_client import AsyncLetta, ConflictError, NotFoundError
from letta_client.types import Folder, ToolReturnMessage
from letta_client.types.agents import FileListResponse as AgentFile
from letta_client.types.folders import FileListResponse, FileRetrieveResponse, FileUploadResponse

from tests.support.documents import pdf_bytes
from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import new_agent, unique

LOCAL_EMBEDDING = "local/all-MiniLM-L6-v2"


async def test_folder_create_retrieve_update_list_and_delete(letta: AsyncLetta):
    name = unique("docs")
    created = await letta.folders.create(
        name=name, description="project docs", instructions="Read before coding.", metadata={"team": "core"}
    )

    assert isinstance(created, Folder) and created.id.startswith("source-")
    assert (created.name, created.description, created.instructions) == (name, "project docs", "Read before coding.")
    assert created.metadata == {"team": "core"}
    assert created.embedding_config.embedding_dim == 384 and created.embedding_config.embedding_chunk_size == 300
    assert await letta.folders.retrieve(created.id) == created

    renamed = unique("manuals")
    updated = await letta.folders.update(created.id, name=renamed, instructions="Cite the page.")
    assert (updated.name, updated.description, updated.instructions) == (renamed, "project docs", "Cite the page.")
    assert updated.embedding_config == created.embedding_config and updated.updated_at > created.updated_at

    other = await letta.folders.create(name=unique("notes"), embedding_chunk_size=512)
    assert other.embedding_config.embedding_chunk_size == 512
    by_name = [folder.id async for folder in letta.folders.list(name=renamed)]
    first_two = [folder.id async for folder in letta.folders.list(limit=1000)][-2:]
    newest_first = [folder.id async for folder in letta.folders.list(order="desc", limit=2)]
    after_first = [folder.id async for folder in letta.folders.list(after=created.id, limit=1000)]
    assert by_name == [created.id]
    assert first_two == [created.id, other.id] and newest_first == [other.id, created.id]
    assert after_first[-1] == other.id and created.id not in after_first

    assert await letta.folders.delete(created.id) is None
    try:
        await letta.folders.retrieve(created.id)
        raise AssertionError("the deleted folder is still there")
    except NotFoundError as error:
        assert created.id in str(error)
    assert [folder.id async for folder in letta.folders.list(name=renamed)] == []


async def test_folder_names_are_unique(letta: AsyncLetta):
    name = unique("shared")
    await letta.folders.create(name=name)
    try:
        await letta.folders.create(name=name)
        raise AssertionError("a second folder with the same name was created")
    except ConflictError as error:
        assert name in str(error)
    assert len([folder async for folder in letta.folders.list(name=name)]) == 1


async def test_attach_list_and_detach_folders(letta: AsyncLetta):
    agent = await new_agent(letta)
    other_agent = await new_agent(letta)
    docs = await letta.folders.create(name=unique("docs"), embedding=LOCAL_EMBEDDING)
    assert docs.embedding_config.handle == LOCAL_EMBEDDING
    notes = await letta.folders.create(name=unique("notes"))

    assert await letta.agents.folders.attach(docs.id, agent_id=agent.id) is None
    assert await letta.agents.folders.attach(notes.id, agent_id=agent.id) is None
    assert await letta.agents.folders.attach(docs.id, agent_id=agent.id) is None  # again: no change
    await letta.agents.folders.attach(docs.id, agent_id=other_agent.id)

    attached = [folder async for folder in letta.agents.folders.list(agent.id)]
    assert [folder.id for folder in attached] == [docs.id, notes.id]
    assert attached[0].name == docs.name and attached[0].vector_db_provider == "native"
    assert sorted(await letta.folders.agents.list(docs.id)) == sorted([agent.id, other_agent.id])
    assert await letta.folders.agents.list(notes.id) == [agent.id]
    state = await letta.agents.retrieve(agent.id, include=["agent.sources"])
    assert [source.id for source in state.sources] == [docs.id, notes.id]
    assert state.sources[0].embedding_config == docs.embedding_config

    assert await letta.agents.folders.detach(docs.id, agent_id=agent.id) is None
    assert [folder.id async for folder in letta.agents.folders.list(agent.id)] == [notes.id]
    assert await letta.folders.agents.list(docs.id) == [other_agent.id]
    state = await letta.agents.retrieve(agent.id, include=["agent.sources"])
    assert [source.id for source in state.sources] == [notes.id]


async def test_deleting_a_folder_or_an_agent_removes_its_links(letta: AsyncLetta):
    agent = await new_agent(letta)
    leaving_agent = await new_agent(letta)
    kept = await letta.folders.create(name=unique("kept"))
    doomed = await letta.folders.create(name=unique("doomed"))
    for folder in (kept, doomed):
        await letta.agents.folders.attach(folder.id, agent_id=agent.id)
    await letta.agents.folders.attach(kept.id, agent_id=leaving_agent.id)

    await letta.folders.delete(doomed.id)
    await letta.agents.delete(leaving_agent.id)

    assert [folder.id async for folder in letta.agents.folders.list(agent.id)] == [kept.id]
    assert await letta.folders.agents.list(kept.id) == [agent.id]
    state = await letta.agents.retrieve(agent.id, include=["agent.sources"])
    assert [source.id for source in state.sources] == [kept.id]


async def test_upload_a_file_and_follow_it_to_completed(letta: AsyncLetta):
    folder = await letta.folders.create(name=unique("guides"), embedding_chunk_size=10)
    text = b"# Setup\n\nInstall the package.\nRun the server.\n"

    uploaded = await letta.folders.files.upload(folder.id, file=("setup.md", text, "text/markdown"))
    assert (uploaded.file_name, uploaded.processing_status) == (f"{folder.name}/setup.md", "parsing")
    async with asyncio.timeout(30):  # the worker process polls: no wakeup reaches it from the server
        while (file := await letta.folders.files.retrieve(uploaded.id, folder_id=folder.id)).processing_status != "completed":
            assert file.processing_status in ("parsing", "embedding"), file.error_message
            await asyncio.sleep(0.2)

    assert (file.file_name, file.total_chunks, file.chunks_embedded, file.content) == ("setup.md", 2, 2, None)
    full = await letta.folders.files.retrieve(uploaded.id, folder_id=folder.id, include_content=True)
    assert full.content == text.decode()
    skipped = await letta.folders.files.upload(folder.id, file=("setup.md", b"other", "text/markdown"), duplicate_handling="skip")
    assert skipped.id == uploaded.id
    try:
        await letta.folders.files.upload(folder.id, file=("setup.md", b"other", "text/markdown"), duplicate_handling="error")
        raise AssertionError("a duplicate was stored under duplicate_handling=error")
    except ConflictError as error:
        assert "'setup.md'" in str(error)
    assert [item.id async for item in letta.folders.files.list(folder.id)] == [uploaded.id]

    assert await letta.folders.files.delete(uploaded.id, folder_id=folder.id) is None
    assert [item.id async for item in letta.folders.files.list(folder.id)] == []


# ---------------------------------------------------------------- issue 27's acceptance test

PDF_PAGES = [["Harbour tide table", "High water at 06:12 and 18:40"], ["Storm signals: two black cones for a northerly gale"]]
# Chunked at the default 300-token chunk size (900 characters of whole lines), lines 1-15 are one
# chunk and the "Lens care" section, lines 16-20, the next: the semantic hit names those lines.
GUIDE_LINES = [
    "# Lighthouse keeper's handbook",
    "",
    "## Lamp room",
    "Light the lamp thirty minutes before sunset and write the exact time in the station journal.",
    "Trim the wick to a clean, even edge so that the flame burns clean and white rather than yellow.",
    "Keep a spare mantle and two cans of paraffin within reach of the stairs at all times.",
    "Wind the clockwork that turns the lens every four hours through the night watch, and log each winding.",
    "Before dawn, put the flame out and draw the curtains to shield the lens from the sun.",
    "Sweep the gallery and wipe the storm panes before the lamp is lit, whatever the weather.",
    "",
    "## Fog signals",
    "Sound the horn for five seconds every thirty seconds while visibility is under two miles.",
    "Record the start and end of every fog period, with the wind direction, in the journal.",
    "Test the compressor and the spare horn on the first day of each month, even in clear summer weather.",
    "",
    "## Lens care",
    "Polish the fresnel lens with a dry chamois cloth every Sunday morning, top prism first.",
    "Never use vinegar or soap on the glass: both leave a film that scatters the beam at sea.",
    "Inspect the brass frame for green corrosion and report any cracked prism to the district.",
    "Wear cotton gloves when touching the lens, as fingerprints etch the glass over the years.",
]
LENS_CARE = (16, 20)
SEARCH_PHRASE = "polish the fresnel lens with a dry chamois cloth"
LOG_BYTES = 5 * 1024 * 1024
NEEDLE_LINES = (12_345, 40_003, 67_890)
OPENED = (40_001, 40_005)  # open_files(offset=40_000, length=5): the needle at 40,003 in the middle
MAX_FILES_OPEN, VIEW_CHARS = 2, 4_000
# The slow part: the local model embeds the log's ~5,900 chunks (~370 tokens each) at 6-11 a second
# on two busy cores, so 9-15 minutes. The suite's bounded form waits for the log to be parsed and
# chunked (`embedding`: open_files, grep_files and the full-text half of semantic search see all of
# it) and for the PDF and the Markdown file to be completed; the heavy form waits for every vector.
PROCESSING_TIMEOUT = 1200.0


def log_lines() -> list[str]:
    """About LOG_BYTES of access-log lines, the same on every run; the lines NEEDLE_LINES (1-based)
    report a checksum mismatch, and no other line does."""
    lines: list[str] = []
    size = 0
    while size < LOG_BYTES:
        n = len(lines) + 1
        stamp = f"2026-11-30T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
        if n in NEEDLE_LINES:
            line = f"{stamp} ERROR [ledger] checksum mismatch in batch {n}"
        else:
            line = f"{stamp} INFO  [gateway] GET /orders/{n * 7919 % 100_000} 200 in {n * 31 % 997} ms"
        lines.append(line)
        size += len(line) + 1
    return lines


async def until_processed(letta: AsyncLetta, folder_id: str, wanted: dict[str, set[str]]) -> list[FileRetrieveResponse]:
    """Poll until each file (id → the statuses awaited) is in one of its statuses (bounded); each must
    pass through parsing and embedding only."""
    async with asyncio.timeout(PROCESSING_TIMEOUT):  # the worker polls: no wakeup reaches it from the server
        while True:
            files = [await letta.folders.files.retrieve(file_id, folder_id=folder_id) for file_id in wanted]
            for file in files:
                assert file.processing_status in ("parsing", "embedding", "completed"), (file.file_name, file.error_message)
            if all(file.processing_status in wanted[file.id] for file in files):
                return files
            await asyncio.sleep(0.5)


def grep_hit(name: str, lines: list[str], line: int) -> str:
    """One match of grep_files' answer, with the default one line of context."""
    around = [f"{'>' if n == line else ' '} {n}: {lines[n - 1]}" for n in (line - 1, line, line + 1)]
    return f"\n=== {name}:{line} ===\n" + "\n".join(around)


def window(lines: list[str], first: int, last: int) -> str:
    return "\n".join(
        [f"[Viewing lines {first} to {last} (out of {len(lines)} lines)]"]
        + [f"{n}: {lines[n - 1]}" for n in range(first, last + 1)]
    )


async def stored_prompt(letta: AsyncLetta, agent_id: str) -> str:
    """The system prompt as stored, the one the model is sent (the SDK has no method for this route)."""
    context = await letta.get(f"/v1/agents/{agent_id}/context", cast_to=object)
    assert isinstance(context, dict)
    return str(context["system_prompt"])


@pytest.mark.parametrize(
    "log_ready",
    [
        pytest.param({"embedding", "completed"}, id="log-chunked"),
        pytest.param({"completed"}, id="log-embedded", marks=pytest.mark.heavy),
    ],
)
async def test_a_pdf_a_markdown_file_and_a_5_mb_log_read_by_the_file_tools_in_one_turn(
    letta: AsyncLetta, llm: ScriptedLLM, log_ready: set[str]
):
    folder = await letta.folders.create(name=unique("station"), instructions="Cite file and line.")
    log = log_lines()
    log_text = "\n".join(log) + "\n"
    guide_text = "\n".join(GUIDE_LINES) + "\n"
    documents = [
        ("manual.pdf", pdf_bytes(PDF_PAGES), "application/pdf"),
        ("guide.md", guide_text.encode(), "text/markdown"),
        ("app.log", log_text.encode(), "text/plain"),
    ]
    started = time.monotonic()
    uploaded = [await letta.folders.files.upload(folder.id, file=document) for document in documents]
    pdf, guide, app_log = (f"{folder.name}/{name}" for name, _, _ in documents)

    assert all(isinstance(file, FileUploadResponse) for file in uploaded)
    assert [(file.file_name, file.processing_status, file.source_id) for file in uploaded] == [
        (name, "parsing", folder.id) for name in (pdf, guide, app_log)
    ]
    assert [file.file_size for file in uploaded] == [len(body) for _, body, _ in documents]
    ready = [{"completed"}, {"completed"}, log_ready]
    processed = await until_processed(
        letta, folder.id, {file.id: statuses for file, statuses in zip(uploaded, ready, strict=True)}
    )
    print(f"uploaded and processed in {time.monotonic() - started:.1f} s")  # shown with -s
    assert all(isinstance(file, FileRetrieveResponse) for file in processed)
    assert [file.file_type for file in processed] == [media_type for _, _, media_type in documents]
    for file in processed:
        done = file.processing_status == "completed"
        assert file.chunks_embedded is not None and file.total_chunks is not None
        assert (file.chunks_embedded == file.total_chunks) if done else (file.chunks_embedded < file.total_chunks)
    assert processed[2].total_chunks is not None and processed[2].total_chunks > LOG_BYTES // 900  # chunks of <= 900 characters
    listed = [file async for file in letta.folders.files.list(folder.id, include_content=True)]
    assert all(isinstance(file, FileListResponse) for file in listed)
    assert {file.file_name: file.content for file in listed} == {
        "manual.pdf": "\n".join(line for page in PDF_PAGES for line in page),
        "guide.md": guide_text,
        "app.log": log_text,
    }

    agent = await new_agent(letta, max_files_open=MAX_FILES_OPEN, per_file_view_window_char_limit=VIEW_CHARS)
    await letta.agents.folders.attach(folder.id, agent_id=agent.id)  # opens the oldest MAX_FILES_OPEN files
    llm.reply(
        tool_calls=[
            ("open_files", {"file_requests": [{"file_name": app_log, "offset": OPENED[0] - 1, "length": 5}]}),
            ("grep_files", {"pattern": "checksum mismatch"}),
            ("semantic_search_files", {"query": SEARCH_PHRASE, "limit": 1}),
        ]
    ).reply(f"Line {NEEDLE_LINES[1]} of the log reports the mismatch; polish the lens on Sundays.")
    response = await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "What broke?"}])

    assert response.stop_reason.stop_reason == "end_turn"
    returned = [m for m in response.messages if isinstance(m, ToolReturnMessage)]
    assert [m.status for m in returned] == ["success"] * 3, [m.tool_return for m in returned]
    opened, grepped, searched = (m.tool_return for m in returned)
    assert opened == (
        f"* Opened {app_log} (lines {OPENED[0]}-{OPENED[1]})\n"
        f"Note: Closed 1 least recently used file(s) due to open file limit: {pdf}"
    )
    assert grepped == "\n".join(
        [
            "Found 3 total matches across 1 files (showing matches 1-3 of 3)",
            "=" * 80,
            "\nFiles with matches:",
            f"  - {app_log}: 3 matches",
            "",
            *(grep_hit(app_log, log, line) for line in NEEDLE_LINES),
            "",
            "No more matches to show.",
        ]
    )
    summary = f"Found 1 semantic matches in 1 file for query: '{SEARCH_PHRASE}'"
    first, last = LENS_CARE
    assert searched == "\n".join(
        [summary, "=" * len(summary), f"\n=== {guide}:{first}-{last} (passage #1) ==="]
        + [f"  {line}" for line in GUIDE_LINES[first - 1 : last]]
    )
    log_window = window(log, *OPENED)
    log_section = (
        f'<file status="open" name="{app_log}">\n<metadata>\n- read_only=true\n- chars_current={len(log_window)}\n'
        f"- chars_limit={VIEW_CHARS}\n- lines_in_view={OPENED[0]}-{OPENED[1]}\n- total_lines={len(log)}\n</metadata>\n"
        f"<value>\n{log_window}\n</value>\n</file>"
    )
    assert log_section in await stored_prompt(letta, agent.id)

    await the_agent_s_files(letta, agent.id, folder.id, names=(pdf, guide, app_log), log_window=log_window)


async def the_agent_s_files(
    letta: AsyncLetta, agent_id: str, folder_id: str, *, names: tuple[str, str, str], log_window: str
) -> None:
    """agents.files after that turn: the guide (searched last) and the log open, the PDF closed."""
    pdf, guide, app_log = names
    views = {view.file_name: view async for view in letta.agents.files.list(agent_id)}
    assert all(isinstance(view, AgentFile) for view in views.values())
    assert {name: (view.is_open, view.folder_id) for name, view in views.items()} == {
        pdf: (False, folder_id),
        guide: (True, folder_id),
        app_log: (True, folder_id),
    }
    assert (views[app_log].start_line, views[app_log].end_line, views[app_log].visible_content) == (*OPENED, log_window)
    assert views[pdf].visible_content is None
    assert sorted([view.file_name async for view in letta.agents.files.list(agent_id, is_open=True)]) == sorted([guide, app_log])

    assert await letta.agents.files.open(views[pdf].file_id, agent_id=agent_id) == [app_log]  # least recently used
    assert await letta.agents.files.close(views[guide].file_id, agent_id=agent_id) == {
        "message": f"File id={views[guide].file_id} successfully closed"
    }
    assert await letta.agents.files.close_all(agent_id) == [pdf]
    assert [view.file_name async for view in letta.agents.files.list(agent_id, is_open=True)] == []
    assert len([view async for view in letta.agents.files.list(agent_id, is_open=False)]) == 3

    await letta.folders.delete(folder_id)
    assert [view async for view in letta.agents.files.list(agent_id)] == []
