"""A new database is given the head schema in one script (db/head_schema.py): the script is what the
migrations make, an empty database ends up as the migrations would leave it, and anything else is
still migrated by Alembic."""

from pathlib import Path

import pytest

from memvm.config import Settings
from memvm.db import migrate
from memvm.db.engine import build_engine
from memvm.db.migrate import HEAD_REVISION, HEAD_SCHEMA_FILE, MigrationPlan, upgrade_to_head
from tests.support.head_schema import head_schema_of, migrated_head_schema, seed_rows
from tests.support.pg import admin_execute, with_database


async def test_the_head_schema_file_is_what_the_migrations_make(server_url: str) -> None:
    assert await migrated_head_schema(server_url) == HEAD_SCHEMA_FILE.read_text(encoding="utf-8"), (
        "migrations/head_schema.sql is not the migrations' output: run `python -m tests.support.head_schema`"
    )


async def _upgrade_new_database(server_url: str, name: str, setup: str | None = None) -> tuple[str, MigrationPlan]:
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    url = with_database(server_url, name)
    engine = build_engine(url, Settings())
    try:
        if setup is not None:
            async with engine.begin() as connection:
                await connection.exec_driver_sql(setup)
        return url, await upgrade_to_head(engine)
    finally:
        await engine.dispose()


async def test_an_empty_database_gets_the_head_schema_and_its_rows(server_url: str) -> None:
    url, plan = await _upgrade_new_database(server_url, "head_schema_loaded")
    try:
        loaded = await head_schema_of(url)
    finally:
        await admin_execute(server_url, "DROP DATABASE head_schema_loaded WITH (FORCE)")

    assert plan == MigrationPlan(current=None, target=HEAD_REVISION, from_head_schema=True)
    assert loaded == HEAD_SCHEMA_FILE.read_text(encoding="utf-8")
    assert f"INSERT INTO public.alembic_version (version_num) VALUES ('{HEAD_REVISION}');" in loaded


async def test_a_database_holding_other_tables_is_migrated_by_alembic(server_url: str) -> None:
    url, plan = await _upgrade_new_database(server_url, "head_schema_beside", "CREATE TABLE someone_elses (x int)")
    try:
        rows = await seed_rows(url)
    finally:
        await admin_execute(server_url, "DROP DATABASE head_schema_beside WITH (FORCE)")

    assert plan == MigrationPlan(current=None, target=HEAD_REVISION, from_head_schema=False)
    assert f"INSERT INTO public.alembic_version (version_num) VALUES ('{HEAD_REVISION}');" in rows


async def test_a_script_of_another_postgresql_version_is_not_used(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "head_schema.sql"
    text = HEAD_SCHEMA_FILE.read_text(encoding="utf-8")
    other.write_text(text.replace(", PostgreSQL ", ", PostgreSQL 9", 1), encoding="utf-8")
    monkeypatch.setattr(migrate, "HEAD_SCHEMA_FILE", other)

    _, plan = await _upgrade_new_database(server_url, "head_schema_other_version")
    await admin_execute(server_url, "DROP DATABASE head_schema_other_version WITH (FORCE)")

    assert plan == MigrationPlan(current=None, target=HEAD_REVISION, from_head_schema=False)
