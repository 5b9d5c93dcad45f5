"""`memvm backup` and `memvm restore` from the outside: a backup taken while `memvm serve` runs brings
every row back into a new data dir; a dump from a newer memvm is refused, an older one is migrated;
a database with data is replaced only with --force."""

import asyncio
import itertools
import os
import shutil
from pathlib import Path

import asyncpg
import httpx
from alembic.script import ScriptDirectory

from memvm.cli.backup import embedded_bin_dir
from memvm.db.migrate import alembic_config
from tests.support.pg import admin_execute, asyncpg_dsn, migrate_to, with_database
from tests.support.scripted_llm import ScriptedLLM
from tests.support.serve import child_env, free_port, memvm, serve

_scratch_numbers = itertools.count(1)


async def embedded_connection(data_dir: Path) -> asyncpg.Connection:
    """A connection to the embedded server `memvm serve` runs on `data_dir` (its socket dir is the
    fifth line of postmaster.pid)."""
    socket_dir = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()[4].strip()
    return await asyncpg.connect(host=socket_dir, user="postgres", database="postgres")


async def table_digests(connection: asyncpg.Connection) -> dict[str, tuple[int, str]]:
    """Every table's row count and a hash of all its rows, as text, in a fixed order."""
    tables = await connection.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
    digests = {}
    for (table,) in tables:
        digests[table] = tuple(
            await connection.fetchrow(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM public.{table} t"
            )
        )
    return digests


async def api_state(http: httpx.AsyncClient) -> dict:
    """What a client sees: every agent with its blocks (value and version), history and passages."""
    state = {}
    for agent in (await http.get("/v1/agents/")).json():
        blocks = (await http.get(f"/v1/agents/{agent['id']}/core-memory/blocks")).json()
        messages = (await http.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc", "limit": 100})).json()
        passages = (await http.get(f"/v1/agents/{agent['id']}/archival-memory")).json()
        state[agent["id"]] = {
            "name": agent["name"],
            "blocks": sorted((b["id"], b["label"], b["value"], b["version"]) for b in blocks),
            "messages": [(m["id"], m["message_type"], m.get("content")) for m in messages],
            "passages": [(p["id"], p["text"]) for p in passages],
        }
    return state


async def write_agents(http: httpx.AsyncClient, llm: ScriptedLLM) -> str:
    """Two agents with blocks edited a few times, a turn that edits memory through a tool, and
    archival passages; returns the first agent's id."""
    agent_ids = []
    for name in ("ada", "bob"):
        created = await http.post(
            "/v1/agents/",
            json={
                "name": name,
                "model": "openai/scripted-model",
                "memory_blocks": [{"label": "human", "value": f"Name: {name}"}, {"label": "persona", "value": "I am Sam."}],
            },
        )
        assert created.status_code == 200, created.text
        agent_ids.append(created.json()["id"])
    for agent_id in agent_ids:
        for version in range(3):
            persona = {"value": f"I am Sam, v{version}."}
            edited = await http.patch(f"/v1/agents/{agent_id}/core-memory/blocks/persona", json=persona)
            assert edited.status_code == 200, edited.text
        for text in ("The garden is north of the house.", "Tea at five."):
            stored = await http.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": f"{text} ({agent_id})"})
            assert stored.status_code == 200, stored.text
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: tea"})]).reply("Noted, you like tea.")
    turn = await http.post(f"/v1/agents/{agent_ids[0]}/messages", json={"input": "I like tea"})
    assert turn.status_code == 200 and turn.json()["messages"][-1]["content"] == "Noted, you like tea.", turn.text
    return agent_ids[0]


async def test_a_backup_taken_while_serving_restores_every_row_into_a_new_data_dir(
    tmp_path: Path, data_dir: Path, llm: ScriptedLLM
) -> None:
    backup_file = tmp_path / "memvm.dump"
    env = child_env(
        MEMVM_DATA_DIR=str(data_dir),
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY="k",
        MEMVM_EMBEDDING_WORKER="false",  # nothing may change the rows between the snapshot and the backup
    )
    port = free_port()
    with serve(tmp_path / "before.log", env, "--port", str(port), port=port) as served:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
            agent_id = await write_agents(http, llm)
            before = await api_state(http)
            connection = await embedded_connection(data_dir)
            try:
                rows_before = await table_digests(connection)
            finally:
                await connection.close()
            backed_up = await asyncio.to_thread(memvm, env, "backup", str(backup_file))
            # Written after the backup: not in it.
            late = await http.patch(f"/v1/agents/{agent_id}/core-memory/blocks/human", json={"value": "after the backup"})
            refused = await asyncio.to_thread(memvm, env, "restore", str(backup_file))
    shutil.rmtree(data_dir)
    restored = await asyncio.to_thread(memvm, env, "restore", str(backup_file))

    assert backed_up.returncode == 0, backed_up.stderr
    assert "the running embedded PostgreSQL" in backed_up.stdout and late.status_code == 200
    assert os.stat(backup_file).st_mode & 0o077 == 0  # it holds secrets: owner-only
    assert refused.returncode == 1 and "held by a running server" in refused.stderr, refused.stderr
    assert restored.returncode == 0, restored.stderr
    port = free_port()
    with serve(tmp_path / "after.log", env, "--port", str(port), port=port) as served:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
            after = await api_state(http)
        connection = await embedded_connection(data_dir)
        try:
            rows_after = await table_digests(connection)
        finally:
            await connection.close()

    assert after == before
    assert rows_after == rows_before
    counts = {table: count for table, (count, _) in rows_before.items()}
    assert counts["agent"] == 2 and counts["block"] == 4 and counts["passage"] == 4
    assert counts["block_change"] >= 4 + 2 * 3 + 1  # created, 3 PATCHes per agent, the tool's insert
    assert counts["message"] >= 4 and counts["run"] == 1
    blocks = {label: (value, version) for _, label, value, version in after[agent_id]["blocks"]}
    assert blocks["persona"] == ("I am Sam, v2.", 4) and blocks["human"][0].endswith("Likes: tea")


def database_env(url: str, **settings: str) -> dict[str, str]:
    """MEMVM_DATABASE_URL with the PATH's PostgreSQL tools; the test server is PostgreSQL 18, so the
    tools on the PATH are the embedded wheel's (a host's own may be older)."""
    return child_env(MEMVM_DATABASE_URL=url, PATH=f"{embedded_bin_dir()}{os.pathsep}{os.environ['PATH']}", **settings)


async def scratch_database(server_url: str) -> str:
    name = f"backup_scratch_{os.getpid()}_{next(_scratch_numbers)}"
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    return with_database(server_url, name)


async def alembic_revision(url: str) -> str:
    connection = await asyncpg.connect(**asyncpg_dsn(url))
    try:
        return await connection.fetchval("SELECT version_num FROM alembic_version")
    finally:
        await connection.close()


async def database_digests(url: str) -> dict[str, tuple[int, str]]:
    connection = await asyncpg.connect(**asyncpg_dsn(url))
    try:
        return await table_digests(connection)
    finally:
        await connection.close()


async def test_a_dump_from_a_newer_memvm_is_refused(database_url: str, db: asyncpg.Connection, tmp_path: Path) -> None:
    await db.execute("UPDATE alembic_version SET version_num = 'f00dfeedbeef'")  # a migration this memvm lacks
    backed_up = await asyncio.to_thread(memvm, database_env(database_url), "backup", str(tmp_path / "newer.dump"))
    fresh_dir = tmp_path / "fresh"
    refused = await asyncio.to_thread(memvm, child_env(MEMVM_DATA_DIR=str(fresh_dir)), "restore", str(tmp_path / "newer.dump"))
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()

    assert backed_up.returncode == 0, backed_up.stderr
    assert refused.returncode == 1 and "newer memvm" in refused.stderr, refused.stderr
    assert "f00dfeedbeef" in refused.stderr and f"the latest here is {head}" in refused.stderr
    assert not fresh_dir.exists()  # refused before anything was started or created


async def test_an_older_dump_is_migrated_and_a_database_with_data_is_replaced_only_with_force(
    server_url: str, tmp_path: Path
) -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    head = scripts.get_current_head()
    assert head is not None
    previous = scripts.get_revision(head).down_revision
    assert isinstance(previous, str)
    older, target = await scratch_database(server_url), await scratch_database(server_url)
    await migrate_to(older, previous)
    dump = str(tmp_path / "older.dump")

    backed_up = await asyncio.to_thread(memvm, database_env(older), "backup", dump)
    migrated = await asyncio.to_thread(memvm, database_env(target), "restore", dump)
    revision_after = await alembic_revision(target)
    not_empty = await asyncio.to_thread(memvm, database_env(target), "restore", dump)
    forced = await asyncio.to_thread(memvm, database_env(target), "restore", "--force", dump)
    without_tools = await asyncio.to_thread(
        memvm, child_env(MEMVM_DATABASE_URL=target, PATH=str(tmp_path)), "restore", "--force", dump
    )

    assert backed_up.returncode == 0 and previous in backed_up.stdout, backed_up.stderr
    assert migrated.returncode == 0 and f"schema revision {previous} migrated to {head}" in migrated.stdout, migrated.stderr
    assert revision_after == head
    assert not_empty.returncode == 1 and "is not empty" in not_empty.stderr and "--force" in not_empty.stderr
    assert forced.returncode == 0 and f"migrated to {head}" in forced.stdout, forced.stderr
    assert await alembic_revision(target) == head
    assert without_tools.returncode == 1 and "not on the PATH" in without_tools.stderr
    assert "postgresql-client" in without_tools.stderr


async def test_a_damaged_dump_changes_nothing(server_url: str, database_url: str, tmp_path: Path) -> None:
    source = await scratch_database(server_url)
    await migrate_to(source, "head")
    connection = await asyncpg.connect(**asyncpg_dsn(source))
    try:  # enough rows that a cut lands in the middle of the data
        await connection.execute("CREATE TABLE filler AS SELECT g, md5(g::text) AS text FROM generate_series(1, 50000) g")
    finally:
        await connection.close()
    dump = tmp_path / "whole.dump"
    backed_up = await asyncio.to_thread(memvm, database_env(source), "backup", str(dump))
    damaged = tmp_path / "damaged.dump"
    damaged.write_bytes(dump.read_bytes()[: dump.stat().st_size // 2])
    rows_before = await database_digests(database_url)
    failed = await asyncio.to_thread(memvm, database_env(database_url), "restore", "--force", str(damaged))
    rows_after = await database_digests(database_url)

    assert backed_up.returncode == 0, backed_up.stderr
    assert failed.returncode == 1 and "nothing was changed" in failed.stderr, failed.stderr
    assert rows_after == rows_before and "filler" not in rows_after
