"""The start-up schema check: a database at HEAD_REVISION is recognised with plain SQL, without
reading the migration scripts; HEAD_REVISION is the scripts' head, so a new migration moves it."""

from typing import Any

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from memvm.config import Settings
from memvm.db.engine import build_engine
from memvm.db.migrate import HEAD_REVISION, alembic_config, migration_plan, upgrade_to_head
from tests.support.events import listening


def test_head_revision_is_the_newest_migration() -> None:
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


async def test_an_up_to_date_database_is_checked_without_the_scripts(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`memvm serve` checks the schema before it forks its processes, and its embedding worker again:
    each check reads the database's revision only (two statements at most)."""
    reads: list[Config] = []
    read_scripts = ScriptDirectory.from_config
    monkeypatch.setattr(ScriptDirectory, "from_config", lambda config: reads.append(config) or read_scripts(config))
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    engine = build_engine(database_url, Settings())
    try:
        with listening(Engine, ("before_cursor_execute", record)):
            plans = [await migration_plan(engine), await upgrade_to_head(engine)]
    finally:
        await engine.dispose()

    assert [(plan.current, plan.up_to_date) for plan in plans] == [(HEAD_REVISION, True)] * 2
    assert reads == []
    checks = [statement for statement in statements if "alembic_version" in statement]
    assert len(checks) == 4  # two per check: does the table exist, and its revision
