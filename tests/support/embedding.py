"""Waiting for the background embedding worker, for tests that search by meaning."""

import asyncio

import asyncpg

# What the worker still has to embed, per table it serves.
PENDING = {
    "message": "SELECT count(*) FROM message WHERE embedding IS NULL AND kind = 'message'",
    "tool": "SELECT count(*) FROM tool WHERE embedding IS NULL",
}


async def wait_embedded(db: asyncpg.Connection, table: str, timeout: float = 60.0) -> None:
    """Return once every row of `table` the worker embeds has its vector; fail after `timeout`."""
    for _ in range(int(timeout / 0.1)):
        if await db.fetchval(PENDING[table]) == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the embedding worker did not embed every {table} within {timeout:g} s")
