"""The migrations that number rows within their owner instead of by one counter for every
organization: a message within its conversation, a block's history row within its block. Stored
numbers stay (each owner keeps its order), the counter goes, and a downgrade brings it back after
renumbering every row in time order."""

from dataclasses import dataclass

import asyncpg
import pytest

from tests.db.test_migrations import insert_agent
from tests.support.pg import database_at, migrate_to


@dataclass(frozen=True)
class Numbered:
    table: str
    text: str  # a column the test writes its text into
    number: str  # the numbered column
    owner: str  # whose rows are numbered together
    before: str  # the revisions around the migration
    after: str
    insert: str  # $1 owner, $2 text; {column} and {value} the number's, when the test gives one

    async def write(self, db: asyncpg.Connection, owner: str, text: str, number: int | None = None) -> None:
        given = number is not None
        sql = self.insert.format(column=f", {self.number}" if given else "", value=", $3" if given else "")
        await db.execute(sql, owner, text, *([number] if given else []))

    async def numbers(self, db: asyncpg.Connection) -> list[tuple[str, str, int]]:
        rows = await db.fetch(f"SELECT {self.owner}, {self.text}, {self.number} FROM {self.table} ORDER BY created_at")
        return [tuple(row) for row in rows]

    async def counters(self, db: asyncpg.Connection) -> int:
        name = f"{self.table}_{self.number}_seq"
        return await db.fetchval("SELECT count(*) FROM pg_class WHERE relkind = 'S' AND relname = $1", name)


MESSAGES = Numbered(
    "message",
    "content",
    "seq",
    "agent_id",
    "6d2f8b4e1a73",
    "9b4d2f7e6c15",
    "INSERT INTO message (id, organization_id, agent_id, content, role, kind, in_context, embed_attempts{column})"
    " SELECT 'message-' || gen_random_uuid(), organization_id, id, $2, 'user', 'message', true, 0{value} FROM agent"
    " WHERE id = $1",
)
BLOCK_CHANGES = Numbered(
    "block_change",
    "value",
    "id",
    "block_id",
    "9b4d2f7e6c15",
    "a6e3c1d8f4b2",
    "INSERT INTO block_change (organization_id, block_id, value, version, change, actor_type, label, char_limit,"
    " read_only, metadata{column}) SELECT id, $1, $2, 1, 'update', 'api', 'human', 100, false, '{{}}'{value} FROM organization",
)


@pytest.mark.parametrize("numbered", [MESSAGES, BLOCK_CHANGES], ids=["message.seq", "block_change.id"])
async def test_stored_numbers_stay_the_counter_goes_and_a_downgrade_renumbers_in_time_order(server_url, numbered):
    async with database_at(server_url, f"upgrade_{numbered.table}_numbers", numbered.before) as (url, db):
        for agent_id in ("owner-1", "owner-2"):
            await insert_agent(db, agent_id)  # a message's owner must be an agent; a block's need not be
        for owner, text in [("owner-1", "one"), ("owner-2", "two"), ("owner-1", "three")]:
            await numbered.write(db, owner, text)
        before = await numbered.numbers(db)
        await migrate_to(url, numbered.after)
        upgraded, counters = await numbered.numbers(db), await numbered.counters(db)
        with pytest.raises(asyncpg.NotNullViolationError):
            await numbered.write(db, "owner-1", "unnumbered")
        await numbered.write(db, "owner-2", "four", number=1)  # owner-1 has a 1: each owner numbers its own
        with pytest.raises(asyncpg.UniqueViolationError):
            await numbered.write(db, "owner-1", "again", number=3)
        await migrate_to(url, numbered.before, down=True)
        downgraded = await numbered.numbers(db)
        await numbered.write(db, "owner-1", "five")
        counted = await db.fetchval(f"SELECT {numbered.number} FROM {numbered.table} WHERE {numbered.text} = 'five'")
        with pytest.raises(asyncpg.UniqueViolationError):
            await numbered.write(db, "owner-2", "taken", number=2)

    assert before == upgraded == [("owner-1", "one", 1), ("owner-2", "two", 2), ("owner-1", "three", 3)]
    assert counters == 0
    assert downgraded == [*upgraded, ("owner-2", "four", 4)]  # renumbered by time: the one written last comes last
    assert counted == 5
