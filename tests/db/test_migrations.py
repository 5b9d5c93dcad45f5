"""Upgrading a database that already holds data: rows written before access control existed end up
in the default organization, and built-in tools stay shared."""

import asyncpg
import pytest

from memvm.actors import DEFAULT_ORGANIZATION_ID
from tests.support.pg import database_at, migrate_to

BEFORE_ORGANIZATIONS = "87555ae4a455"


async def insert_agent(db: asyncpg.Connection, agent_id: str = "agent-1") -> None:
    """An agent row of the default organization, as any schema since organizations holds it."""
    await db.execute(
        "INSERT INTO agent (id, organization_id, name, agent_type, system, memory_render_mode, tags, metadata, timezone,"
        " compiled_system) VALUES ($1, $2, 'a', 'letta_v1_agent', 's', 'standard', '{}', '{}', 'UTC', '')",
        agent_id,
        DEFAULT_ORGANIZATION_ID,
    )


async def test_existing_rows_move_into_the_default_organization(server_url):
    async with database_at(server_url, "upgrade_with_data", BEFORE_ORGANIZATIONS) as (url, db):
        await db.execute(
            "INSERT INTO agent (id, name, agent_type, system, memory_render_mode, tags, metadata, timezone, compiled_system)"
            " VALUES ('agent-1', 'a', 'letta_v1_agent', 's', 'standard', '{}', '{}', 'UTC', '')"
        )
        await db.execute(
            "INSERT INTO block (id, label, value, char_limit, read_only, metadata, tags, version)"
            " VALUES ('block-1', 'human', 'Bob', 100, false, '{}', '{}', 1)"
        )
        await db.execute("INSERT INTO agent_block (agent_id, block_id, label) VALUES ('agent-1', 'block-1', 'human')")
        await db.execute(
            "INSERT INTO tool (id, name, tool_type, description, json_schema, tags)"
            " VALUES ('tool-1', 'send_message', 'letta_core', 'd', '{}', '{}')"
        )
        await migrate_to(url, "head")
        owners = {
            table: await db.fetchval(f"SELECT organization_id FROM {table}")
            for table in ("agent", "block", "agent_block", "tool")
        }
        default = await db.fetchval("SELECT name FROM organization WHERE id = $1", DEFAULT_ORGANIZATION_ID)

    assert owners == {
        "agent": DEFAULT_ORGANIZATION_ID,
        "block": DEFAULT_ORGANIZATION_ID,
        "agent_block": DEFAULT_ORGANIZATION_ID,
        "tool": None,
    }
    assert default == "default"


BEFORE_AUTOCLEAR = "3c9a7d5e1f20"


async def test_existing_agents_get_message_buffer_autoclear_off(server_url):
    async with database_at(server_url, "upgrade_autoclear", BEFORE_AUTOCLEAR) as (url, db):
        await insert_agent(db)
        await migrate_to(url, "head")
        autoclear = await db.fetchval("SELECT message_buffer_autoclear FROM agent WHERE id = 'agent-1'")
        nullable = await db.fetchval(
            "SELECT is_nullable FROM information_schema.columns"
            " WHERE table_name = 'agent' AND column_name = 'message_buffer_autoclear'"
        )

    assert autoclear is False and nullable == "NO"


async def test_existing_block_history_keeps_its_rows_and_gains_provenance(server_url):
    # 9e4a1c6b2d87: before the history's run, tool call and restored version
    async with database_at(server_url, "upgrade_block_history", "9e4a1c6b2d87") as (url, db):
        await db.execute(
            "INSERT INTO block_change (organization_id, block_id, version, change, actor_type, actor_id, step_id, label,"
            " value, char_limit, read_only, metadata) VALUES ($1, 'block-1', 2, 'update', 'agent', 'agent-1', 'step-1',"
            " 'human', 'Ana', 100, false, '{}')",
            DEFAULT_ORGANIZATION_ID,
        )
        await migrate_to(url, "head")
        row = await db.fetchrow("SELECT version, value, step_id, run_id, tool_call_id, restored_version FROM block_change")
        indexed = await db.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_block_change_block_id_version'")

    assert dict(row) == {
        "version": 2,
        "value": "Ana",
        "step_id": "step-1",
        "run_id": None,
        "tool_call_id": None,
        "restored_version": None,
    }
    assert indexed == 1


BEFORE_CONVERSATIONS = "9f49647870c4"
IN_CONTEXT_INDEX = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_message_in_context'"


async def _history_before_conversations(db) -> None:
    """An agent with two runs (one step each) and four messages, two of them out of its window."""
    await insert_agent(db)
    for run in ("run-1", "run-2"):
        await db.execute(
            "INSERT INTO run (id, organization_id, agent_id, status) VALUES ($1, $2, 'agent-1', 'completed')",
            run,
            DEFAULT_ORGANIZATION_ID,
        )
        await db.execute(
            "INSERT INTO step (id, organization_id, agent_id, run_id, status) VALUES ($1, $2, 'agent-1', $3, 'success')",
            run.replace("run", "step"),
            DEFAULT_ORGANIZATION_ID,
            run,
        )
    for n, (run, role, in_context) in enumerate(
        [("run-1", "user", False), ("run-1", "assistant", False), ("run-2", "user", True), ("run-2", "assistant", True)]
    ):
        await db.execute(
            "INSERT INTO message (id, organization_id, agent_id, run_id, role, kind, content, in_context, embed_attempts)"
            " VALUES ($1, $2, 'agent-1', $3, $4, 'message', $5, $6, 5)",
            f"message-{n}",
            DEFAULT_ORGANIZATION_ID,
            run,
            role,
            f"text {n}",
            in_context,
        )


async def test_existing_history_becomes_the_default_conversation_and_downgrades_back(server_url):
    async with database_at(server_url, "upgrade_conversations", BEFORE_CONVERSATIONS) as (url, db):
        await _history_before_conversations(db)
        await migrate_to(url, "head")
        upgraded = {
            table: [tuple(r) for r in await db.fetch(f"SELECT id, conversation_id FROM {table} ORDER BY id")]
            for table in ("message", "run", "step")
        }
        window = [r["id"] for r in await db.fetch("SELECT id FROM message WHERE in_context ORDER BY seq")]
        upgraded_index = await db.fetchval(IN_CONTEXT_INDEX)
        await migrate_to(url, BEFORE_CONVERSATIONS, down=True)
        kept = {table: await db.fetchval(f"SELECT count(*) FROM {table}") for table in ("message", "run", "step")}
        leftovers = await db.fetchval(
            "SELECT count(*) FROM information_schema.columns WHERE column_name = 'conversation_id'"
            " OR table_name IN ('conversation', 'conversation_block')"
        )
        downgraded_index = await db.fetchval(IN_CONTEXT_INDEX)

    assert upgraded == {
        "message": [(f"message-{n}", None) for n in range(4)],
        "run": [("run-1", None), ("run-2", None)],
        "step": [("step-1", None), ("step-2", None)],
    }
    assert window == ["message-2", "message-3"]
    assert "(agent_id, conversation_id, seq) WHERE in_context" in upgraded_index
    assert kept == {"message": 4, "run": 2, "step": 2} and leftovers == 0
    assert "(agent_id, seq) WHERE in_context" in downgraded_index


BEFORE_MEMFS = "5c1e0a7d9b23"
MEMFS_TABLES = "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'memfs_%'"


async def test_memfs_tables_come_and_go_with_their_migration_and_go_with_their_agent(server_url):
    async with database_at(server_url, "upgrade_memfs", BEFORE_MEMFS) as (url, db):
        await insert_agent(db)
        before = await db.fetchval(MEMFS_TABLES)
        await migrate_to(url, "head")
        await db.execute(
            "INSERT INTO memfs_commit (agent_id, organization_id, seq, sha, blocks) VALUES ('agent-1', $1, 1, 'c0ffee', '{}')",
            DEFAULT_ORGANIZATION_ID,
        )
        await db.execute(
            "INSERT INTO memfs_object (agent_id, organization_id, sha, type_num, data) VALUES ('agent-1', $1, 'c0ffee', 3, 'x')",
            DEFAULT_ORGANIZATION_ID,
        )
        upgraded = await db.fetchval(MEMFS_TABLES)
        await db.execute("DELETE FROM agent WHERE id = 'agent-1'")
        orphans = await db.fetchval("SELECT (SELECT count(*) FROM memfs_commit) + (SELECT count(*) FROM memfs_object)")
        await migrate_to(url, BEFORE_MEMFS, down=True)
        downgraded = await db.fetchval(MEMFS_TABLES)

    assert (before, upgraded, orphans, downgraded) == (0, 3, 0, 0)


BEFORE_FOLDERS = "7d2f4b8e6a10"
FOLDER_TABLES = "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('folder', 'agent_folder')"
FOLDER_COLUMNS = "id, organization_id, name, embedding_model, embedding_dim, chunk_size, metadata"


async def test_folder_tables_come_and_go_with_their_migration_and_links_go_with_agents_and_folders(server_url):
    async with database_at(server_url, "upgrade_folders", BEFORE_FOLDERS) as (url, db):
        for agent_id in ("agent-1", "agent-2"):
            await insert_agent(db, agent_id)
        before = await db.fetchval(FOLDER_TABLES)
        await migrate_to(url, "head")
        for folder_id in ("source-1", "source-2"):
            await db.execute(
                f"INSERT INTO folder ({FOLDER_COLUMNS}) VALUES ($1, $2, $3, 'local/m', 384, 300, '{{}}')",
                folder_id,
                DEFAULT_ORGANIZATION_ID,
                f"{folder_id} docs",
            )
        links = [("agent-1", "source-1"), ("agent-1", "source-2"), ("agent-2", "source-1")]
        for agent_id, folder_id in links:
            await db.execute(
                "INSERT INTO agent_folder (agent_id, folder_id, organization_id) VALUES ($1, $2, $3)",
                agent_id,
                folder_id,
                DEFAULT_ORGANIZATION_ID,
            )
        with pytest.raises(asyncpg.UniqueViolationError):
            await db.execute(
                f"INSERT INTO folder ({FOLDER_COLUMNS}) VALUES ('source-3', $1, 'source-1 docs', 'local/m', 384, 300, '{{}}')",
                DEFAULT_ORGANIZATION_ID,
            )
        upgraded = await db.fetchval(FOLDER_TABLES)
        await db.execute("DELETE FROM agent WHERE id = 'agent-2'")
        await db.execute("DELETE FROM folder WHERE id = 'source-2'")
        left = [tuple(row) for row in await db.fetch("SELECT agent_id, folder_id FROM agent_folder")]
        await migrate_to(url, BEFORE_FOLDERS, down=True)
        downgraded = await db.fetchval(FOLDER_TABLES)

    assert (before, upgraded, left, downgraded) == (0, 2, [("agent-1", "source-1")], 0)


BEFORE_FILES = "3b8e5f1a7c42"
FILE_TABLES = "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('folder_file', 'file_chunk', 'agent_file')"
AGENT_FILE_SETTINGS = (
    "SELECT count(*) FROM information_schema.columns WHERE table_name = 'agent'"
    " AND column_name IN ('max_files_open', 'per_file_view_window_char_limit')"
)


async def _insert_file(db: asyncpg.Connection, file_id: str, status: str = "parsing") -> None:
    await db.execute(
        "INSERT INTO folder_file (id, organization_id, folder_id, file_name, original_file_name, file_type,"
        " file_size, processing_status) VALUES ($1::text, $2, 'source-1', $1::text, $1::text, 'text/plain', 3, $3)",
        file_id,
        DEFAULT_ORGANIZATION_ID,
        status,
    )


async def test_file_tables_come_and_go_with_their_migration_and_chunks_and_views_go_with_their_file(server_url):
    async with database_at(server_url, "upgrade_files", BEFORE_FILES) as (url, db):
        await insert_agent(db, "agent-1")
        before = (await db.fetchval(FILE_TABLES), await db.fetchval(AGENT_FILE_SETTINGS))
        await migrate_to(url, "head")
        await db.execute(
            f"INSERT INTO folder ({FOLDER_COLUMNS}) VALUES ('source-1', $1, 'docs', 'local/m', 384, 300, '{{}}')",
            DEFAULT_ORGANIZATION_ID,
        )
        for file_id in ("file-1", "file-2"):
            await _insert_file(db, file_id)
            await db.execute(
                "INSERT INTO file_chunk (organization_id, file_id, folder_id, seq, start_line, end_line, text)"
                " VALUES ($1, $2, 'source-1', 0, 1, 2, 'the quick fox')",
                DEFAULT_ORGANIZATION_ID,
                file_id,
            )
            await db.execute(
                "INSERT INTO agent_file (id, organization_id, agent_id, file_id, folder_id, is_open)"
                " VALUES ($1, $2, 'agent-1', $3, 'source-1', true)",
                f"file_agent-{file_id}",
                DEFAULT_ORGANIZATION_ID,
                file_id,
            )
        with pytest.raises(asyncpg.CheckViolationError):
            await _insert_file(db, "file-3", status="done")
        searchable = await db.fetchval("SELECT count(*) FROM file_chunk WHERE fts @@ to_tsquery('english', 'fox')")
        upgraded = (await db.fetchval(FILE_TABLES), await db.fetchval(AGENT_FILE_SETTINGS))
        await db.execute("DELETE FROM folder_file WHERE id = 'file-2'")
        left = [
            (await db.fetchval("SELECT array_agg(file_id) FROM file_chunk")),
            (await db.fetchval("SELECT array_agg(file_id) FROM agent_file")),
        ]
        await migrate_to(url, BEFORE_FILES, down=True)
        downgraded = (await db.fetchval(FILE_TABLES), await db.fetchval(AGENT_FILE_SETTINGS))

    assert (before, upgraded, searchable, left, downgraded) == ((0, 0), (3, 2), 2, [["file-1"], ["file-1"]], (0, 0))


BEFORE_IDENTITIES = "4c9d2e7f1b85"
IDENTITIES = "5e1f3a9c2d74"
IDENTITY_TABLES = (
    "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('identity', 'identity_agent', 'identity_block')"
)


async def _insert_identity(db: asyncpg.Connection, identity_id: str, key: str, identity_type: str = "user") -> None:
    await db.execute(
        "INSERT INTO identity (id, organization_id, identifier_key, name, identity_type, properties)"
        " VALUES ($1, $2, $3, 'Bob', $4, '[]')",
        identity_id,
        DEFAULT_ORGANIZATION_ID,
        key,
        identity_type,
    )


async def test_identity_tables_come_and_go_with_their_migration_and_links_go_with_their_ends(server_url):
    async with database_at(server_url, "upgrade_identities", BEFORE_IDENTITIES) as (url, db):
        for agent_id in ("agent-1", "agent-2"):
            await insert_agent(db, agent_id)
        await db.execute(
            "INSERT INTO block (id, organization_id, label, value, char_limit, read_only, metadata, tags, version)"
            " VALUES ('block-1', $1, 'team', 'plans', 100, false, '{}', '{}', 1)",
            DEFAULT_ORGANIZATION_ID,
        )
        before = await db.fetchval(IDENTITY_TABLES)
        await migrate_to(url, IDENTITIES)
        await _insert_identity(db, "identity-1", "user-1")
        await _insert_identity(db, "identity-2", "user-2")
        for identity_id, agent_id in (("identity-1", "agent-1"), ("identity-1", "agent-2"), ("identity-2", "agent-1")):
            await db.execute(
                "INSERT INTO identity_agent (identity_id, agent_id, organization_id) VALUES ($1, $2, $3)",
                identity_id,
                agent_id,
                DEFAULT_ORGANIZATION_ID,
            )
        await db.execute(
            "INSERT INTO identity_block (identity_id, block_id, organization_id) VALUES ('identity-2', 'block-1', $1)",
            DEFAULT_ORGANIZATION_ID,
        )
        with pytest.raises(asyncpg.UniqueViolationError):
            await _insert_identity(db, "identity-3", "user-1")
        with pytest.raises(asyncpg.CheckViolationError):
            await _insert_identity(db, "identity-3", "user-3", identity_type="robot")
        upgraded = await db.fetchval(IDENTITY_TABLES)
        await db.execute("DELETE FROM agent WHERE id = 'agent-2'")
        await db.execute("DELETE FROM identity WHERE id = 'identity-2'")
        left = [tuple(row) for row in await db.fetch("SELECT identity_id, agent_id FROM identity_agent")]
        blocks_left = await db.fetchval("SELECT count(*) FROM identity_block")
        await migrate_to(url, BEFORE_IDENTITIES, down=True)
        downgraded = await db.fetchval(IDENTITY_TABLES)

    assert (before, upgraded, left, blocks_left, downgraded) == (0, 3, [("identity-1", "agent-1")], 0, 0)


BEFORE_MCP = "6a2b4c8d0e96"
MCP = "7c3d5e9f1a27"


async def _insert_tool(db: asyncpg.Connection, tool_id: str, server_id: str | None) -> None:
    await db.execute(
        "INSERT INTO tool (id, organization_id, name, tool_type, description, json_schema, tags, mcp_server_id)"
        " VALUES ($1, $2, $5, $3, 'd', '{}', '{}', $4)",
        tool_id,
        DEFAULT_ORGANIZATION_ID,
        "external_mcp" if server_id else "custom",
        server_id,
        tool_id,
    )


async def test_mcp_servers_come_and_go_with_their_migration_and_their_tools_go_with_them(server_url):
    async with database_at(server_url, "upgrade_mcp", BEFORE_MCP) as (url, db):
        await insert_agent(db)
        await migrate_to(url, MCP)
        for server_id in ("mcp_server-1", "mcp_server-2"):
            await db.execute(
                "INSERT INTO mcp_server (id, organization_id, server_name, server_type, command)"
                " VALUES ($1, $2, $3, 'stdio', 'x')",
                server_id,
                DEFAULT_ORGANIZATION_ID,
                server_id,
            )
        await _insert_tool(db, "tool-1", "mcp_server-1")
        await _insert_tool(db, "tool-2", "mcp_server-2")
        await _insert_tool(db, "tool-3", None)
        await db.execute(
            "INSERT INTO agent_tool (agent_id, tool_id, organization_id) VALUES ('agent-1', 'tool-1', $1)",
            DEFAULT_ORGANIZATION_ID,
        )
        with pytest.raises(asyncpg.UniqueViolationError):
            await db.execute(
                "INSERT INTO mcp_server (id, organization_id, server_name, server_type, command)"
                " VALUES ('mcp_server-3', $1, 'mcp_server-1', 'stdio', 'x')",
                DEFAULT_ORGANIZATION_ID,
            )
        with pytest.raises(asyncpg.CheckViolationError):
            await db.execute(
                "INSERT INTO mcp_server (id, organization_id, server_name, server_type) VALUES ('mcp_server-3', $1, 'w', 'ws')",
                DEFAULT_ORGANIZATION_ID,
            )
        status = await db.fetchval("SELECT status FROM mcp_server WHERE id = 'mcp_server-1'")
        await db.execute("DELETE FROM mcp_server WHERE id = 'mcp_server-1'")
        tools_left = [row["id"] for row in await db.fetch("SELECT id FROM tool ORDER BY id")]
        links_left = await db.fetchval("SELECT count(*) FROM agent_tool")
        await migrate_to(url, BEFORE_MCP, down=True)
        after_down = [row["id"] for row in await db.fetch("SELECT id FROM tool ORDER BY id")]
        table_gone = await db.fetchval("SELECT to_regclass('mcp_server') IS NULL")

    assert (status, tools_left, links_left) == ("unknown", ["tool-2", "tool-3"], 0)
    assert (after_down, table_gone) == (["tool-3"], True)


PASSAGE_FTS = "3e8a1f6c2b94"
PASSAGE_FTS_INDEX = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_passage_archive_id_fts'"
PASSAGE_FTS_COLUMN = "SELECT count(*) FROM information_schema.columns WHERE table_name = 'passage' AND column_name = 'fts'"


async def test_passage_full_text_comes_and_goes_with_its_migration_and_covers_existing_passages(server_url):
    async with database_at(server_url, "upgrade_passage_fts", MCP) as (url, db):
        await db.execute(
            "INSERT INTO archive (id, organization_id, name, embedding_model, embedding_dim, metadata)"
            " VALUES ('archive-1', $1, 'a', 'm', 3, '{}')",
            DEFAULT_ORGANIZATION_ID,
        )
        await db.execute(
            "INSERT INTO passage (id, organization_id, archive_id, text, embedding, embedding_model, embedding_dim, tags,"
            " metadata, writer_type) VALUES ('passage-1', $1, 'archive-1', 'Zanzibar sailed away', '[1,0,0]', 'm', 3,"
            " '{}', '{}', 'api')",
            DEFAULT_ORGANIZATION_ID,
        )
        await migrate_to(url, PASSAGE_FTS)
        index = await db.fetchval(PASSAGE_FTS_INDEX)
        document = await db.fetchval("SELECT fts::text FROM passage WHERE id = 'passage-1'")
        matched = await db.fetchval(
            "SELECT count(*) FROM passage WHERE archive_id = 'archive-1' AND fts @@ plainto_tsquery('english', 'zanzibar')"
        )
        await migrate_to(url, MCP, down=True)
        gone = (await db.fetchval(PASSAGE_FTS_INDEX), await db.fetchval(PASSAGE_FTS_COLUMN))
        text_kept = await db.fetchval("SELECT text FROM passage WHERE id = 'passage-1'")

    assert "USING gin (archive_id, fts)" in index
    assert (document, matched) == ("'away':3 'sail':2 'zanzibar':1", 1)
    assert (gone, text_kept) == ((None, 0), "Zanzibar sailed away")
