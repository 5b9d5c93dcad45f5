"""Alembic migrations run programmatically on an open connection (the schema's only source)."""

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger("memvm")

# src/memvm/db/migrate.py → repository root; the project is installed in place (pip install -e).
MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"
# Serializes replicas that start together so only one runs the migrations.
_MIGRATION_LOCK_KEY = 0x6D656D766D  # "memvm"


@dataclass(frozen=True)
class MigrationPlan:
    current: str | None
    target: str

    @property
    def up_to_date(self) -> bool:
        return self.current == self.target


def alembic_config() -> Config:
    if not (MIGRATIONS_DIR / "env.py").is_file():
        raise RuntimeError(f"migrations not found at {MIGRATIONS_DIR}; install memvm from its source tree (pip install -e .)")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


@functools.cache
def head_revision() -> str:
    """The newest revision of the migration scripts. Reading them costs a process a tenth of a second
    or more of CPU, so once: the scripts are this code's, and a process forked after a check (`memvm
    serve`'s HTTP processes and embedding worker) inherits the answer."""
    target = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if target is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}; the source tree is incomplete")
    return target


def _plan(connection: Connection) -> MigrationPlan:
    current = MigrationContext.configure(connection).get_current_revision()
    return MigrationPlan(current=current, target=head_revision())


def _upgrade(connection: Connection) -> MigrationPlan:
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
    plan = _plan(connection)
    if not plan.up_to_date:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return plan


async def migration_plan(engine: AsyncEngine) -> MigrationPlan:
    async with engine.connect() as connection:
        return await connection.run_sync(_plan)


async def upgrade_to_head(engine: AsyncEngine) -> MigrationPlan:
    """Upgrade to head in one transaction (logged when there was anything to do); returns the plan
    that was carried out."""
    async with engine.begin() as connection:
        plan = await connection.run_sync(_upgrade)
    if not plan.up_to_date:
        log.info("database migrated %s → %s", plan.current or "empty", plan.target)
    return plan
