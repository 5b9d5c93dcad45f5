"""Alembic migrations run programmatically on an open connection (the schema's only source)."""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only

from memvm.db.head_schema import read_head_schema

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger("memvm")

# The newest migration's revision. A start compares the database's with it in plain SQL: reading the
# scripts to learn it costs a process a tenth of a second or more of CPU. A new migration moves it
# (tests/db/test_schema_check.py fails until it does).
HEAD_REVISION = "a6e3c1d8f4b2"

# src/memvm/db/migrate.py → repository root; the project is installed in place (pip install -e).
MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"
# What the migrations make of an empty database, dumped (db/head_schema.py says when it is used).
HEAD_SCHEMA_FILE = MIGRATIONS_DIR / "head_schema.sql"
# Serializes replicas that start together so only one runs the migrations.
_MIGRATION_LOCK_KEY = 0x6D656D766D  # "memvm"


@dataclass(frozen=True)
class MigrationPlan:
    current: str | None
    target: str
    from_head_schema: bool = False  # an empty database was given the head schema in one round trip

    @property
    def up_to_date(self) -> bool:
        return self.current == self.target


def alembic_config() -> "Config":
    from alembic.config import Config  # alembic only loads when there is something to migrate

    if not (MIGRATIONS_DIR / "env.py").is_file():
        raise RuntimeError(f"migrations not found at {MIGRATIONS_DIR}; install memvm from its source tree (pip install -e .)")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def _plan(connection: Connection) -> MigrationPlan:
    """The database's revision against HEAD_REVISION, read as alembic stores it (no table: empty)."""
    if connection.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
        return MigrationPlan(current=None, target=HEAD_REVISION)
    current = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return MigrationPlan(current=current, target=HEAD_REVISION)


def _upgrade(connection: Connection) -> MigrationPlan:
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
    plan = _plan(connection)
    if plan.current is None and _create_at_head(connection):
        return MigrationPlan(current=None, target=plan.target, from_head_schema=True)
    if not plan.up_to_date:
        from alembic import command

        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return plan


def _create_at_head(connection: Connection) -> bool:
    """Give an empty database the head schema, when the file holds it for this server's version."""
    head = read_head_schema(HEAD_SCHEMA_FILE)
    if head is None or head.revision != HEAD_REVISION:
        return False
    row = connection.execute(text(_SERVER_AND_CONTENTS)).one()
    if row.major != head.major or not row.empty:
        return False
    # The script holds many statements: the driver sends it as one simple query, in this transaction.
    await_only(connection.connection.driver_connection.execute(head.sql))  # type: ignore[union-attr]
    return True


_SERVER_AND_CONTENTS = """
SELECT current_setting('server_version_num')::int / 10000 AS major,
       NOT EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public') AS empty
"""


async def migration_plan(engine: AsyncEngine) -> MigrationPlan:
    async with engine.connect() as connection:
        return await connection.run_sync(_plan)


async def upgrade_to_head(engine: AsyncEngine) -> MigrationPlan:
    """Upgrade to head in one transaction (logged when there was anything to do); returns the plan
    that was carried out."""
    async with engine.begin() as connection:
        plan = await connection.run_sync(_upgrade)
    if plan.from_head_schema:
        log.info("database created at %s from %s", plan.target, HEAD_SCHEMA_FILE.name)
    elif not plan.up_to_date:
        log.info("database migrated %s → %s", plan.current or "empty", plan.target)
    return plan
