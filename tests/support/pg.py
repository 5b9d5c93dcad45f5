"""URL and admin helpers for the tests' PostgreSQL."""

import asyncpg
from sqlalchemy.engine import make_url

# The migrated database every test database is cloned from (CREATE DATABASE ... TEMPLATE).
TEMPLATE_DB = "memvm_template"


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


def asyncpg_dsn(url: str) -> dict:
    parsed = make_url(url)
    return {"user": parsed.username, "database": parsed.database, "host": parsed.query.get("host") or parsed.host}


async def admin_execute(server_url: str, sql: str) -> None:
    """Run one statement (CREATE/DROP DATABASE) on the server's admin database, on a connection of its own."""
    admin = await asyncpg.connect(**asyncpg_dsn(server_url))
    try:
        await admin.execute(sql)
    finally:
        await admin.close()
