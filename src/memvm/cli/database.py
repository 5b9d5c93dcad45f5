"""The commands that work straight against the database (keys, agents, blocks, db upgrade): on
MEMVM_DATABASE_URL, or the embedded database when no running server holds it."""

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from memvm.cli.options import Commands, settings_of
from memvm.config import Settings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    from memvm.db.database import DatabaseTarget

DatabaseCommand = Callable[[argparse.Namespace, "async_sessionmaker[AsyncSession]"], Awaitable[int]]


def add_commands(commands: Commands) -> None:
    db = commands.add_parser("db", help="database maintenance").add_subparsers(title="db commands")
    upgrade = db.add_parser("upgrade", help="migrate the database to the latest schema, printing current → target")
    upgrade.set_defaults(run=_db_upgrade)


def embedded_database_held(settings: Settings, advice: str) -> bool:
    """True (after saying so, with `advice`) when no MEMVM_DATABASE_URL is set and a running server
    holds the embedded database."""
    from memvm.db.database import embedded_server_pid

    if settings.database_url is not None or (pid := embedded_server_pid(settings.embedded_pg_dir)) is None:
        return False
    print(
        f"The embedded database in {settings.embedded_pg_dir} is held by a running server (postgres pid {pid}); {advice}",
        file=sys.stderr,
    )
    return True


def with_database(args: argparse.Namespace, command: DatabaseCommand) -> int:
    """Run `command` against MEMVM_DATABASE_URL, or the embedded database when no server holds it."""
    from memvm.db.database import resolve_database

    settings = settings_of(args)
    advice = (
        "this command cannot open it. Stop `memvm serve` and run it again, or use the running server's API "
        "(the admin API for keys, POST /v1/agents/import and GET /v1/agents/{id}/export for agent files)."
    )
    if embedded_database_held(settings, advice):
        return 1
    return asyncio.run(_run_with_database(resolve_database(settings), settings, args, command))


async def _run_with_database(
    target: "DatabaseTarget", settings: Settings, args: argparse.Namespace, command: DatabaseCommand
) -> int:
    from memvm.db.engine import build_engine, build_sessionmaker
    from memvm.db.migrate import upgrade_to_head

    engine = build_engine(target.url, settings)
    try:
        if settings.migrate_on_start:
            await upgrade_to_head(engine)
        return await command(args, build_sessionmaker(engine))
    finally:
        await engine.dispose()


def _db_upgrade(args: argparse.Namespace) -> int:
    from memvm.db.database import resolve_database

    settings = settings_of(args)
    target = resolve_database(settings)
    print(f"database: {target.description}")
    return asyncio.run(_upgrade(target, settings))


async def _upgrade(target: "DatabaseTarget", settings: Settings) -> int:
    from memvm.db.engine import build_engine
    from memvm.db.migrate import migration_plan, upgrade_to_head

    engine = build_engine(target.url, settings)
    try:
        plan = await migration_plan(engine)
        print(f"schema: {plan.current or '(empty)'} → {plan.target}")
        if plan.up_to_date:
            print("already at the latest revision; nothing to do")
            return 0
        await upgrade_to_head(engine)
        print("upgraded")
        return 0
    finally:
        await engine.dispose()
