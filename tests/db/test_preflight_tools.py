"""`memvm serve` stores the built-in tools once, in its preflight, before it forks its HTTP processes
(which skip it): a start on a database that already holds this code's built-ins reads them and writes
nothing; a built-in whose stored row differs from the code's is written again."""

import asyncio
import re
from typing import Any

import asyncpg
from sqlalchemy.engine import Engine

from memvm.cli import preflight
from memvm.config import Settings
from memvm.db.database import DatabaseTarget
from tests.support.events import listening

TOOL_STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE)\b.*\b(?:FROM|INTO|UPDATE)\s+tool\b", re.IGNORECASE | re.DOTALL)


async def statements_on_tools_of_a_start(database_url: str) -> list[str]:
    """The kind of each statement on the tool table that a preflight sends (in a thread: it runs its
    own event loop, as `memvm serve` does)."""
    kinds: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if match := TOOL_STATEMENT.match(statement):
            kinds.append(match[1].upper())

    target = DatabaseTarget(database_url, "test database")
    with listening(Engine, ("before_cursor_execute", record)):
        await asyncio.to_thread(preflight.prepare_database, target, Settings(database_url=database_url))
    return kinds


async def test_a_start_on_an_up_to_date_database_only_reads_the_built_ins(database_url: str) -> None:
    assert await statements_on_tools_of_a_start(database_url) == ["SELECT"]
    assert await statements_on_tools_of_a_start(database_url) == ["SELECT"]


async def test_a_start_writes_a_built_in_whose_stored_row_differs_again(database_url: str, db: asyncpg.Connection) -> None:
    await db.execute("UPDATE tool SET description = 'an older description' WHERE name = 'send_message'")

    repairing = await statements_on_tools_of_a_start(database_url)
    description = await db.fetchval("SELECT description FROM tool WHERE name = 'send_message' AND organization_id IS NULL")

    assert repairing == ["SELECT", "INSERT"]  # the upsert of that one tool
    assert description.startswith("Send a message")
    assert await statements_on_tools_of_a_start(database_url) == ["SELECT"]
