"""`memvm` command line: serve, db upgrade, version."""

import argparse
import asyncio
import logging
import signal
import sys
from typing import TYPE_CHECKING

from memvm import __version__
from memvm.config import Settings

if TYPE_CHECKING:
    from memvm.db.database import DatabaseTarget

log = logging.getLogger("memvm")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    code: int = args.run(args)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memvm", description="Stateful LLM agents with self-editing memory.")
    commands = parser.add_subparsers(title="commands")

    serve = commands.add_parser("serve", help="run the HTTP server (embedded PostgreSQL unless MEMVM_DATABASE_URL is set)")
    serve.add_argument("--host", help="interface to listen on (default 127.0.0.1, or MEMVM_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8283, or MEMVM_PORT)")
    serve.set_defaults(run=_serve)

    db = commands.add_parser("db", help="database maintenance").add_subparsers(title="db commands")
    upgrade = db.add_parser("upgrade", help="migrate the database to the latest schema, printing current → target")
    upgrade.set_defaults(run=_db_upgrade)

    version = commands.add_parser("version", help="print the memvm version")
    version.set_defaults(run=lambda args: print(f"memvm {__version__}") or 0)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {key: value for key in ("host", "port") if (value := getattr(args, key, None)) is not None}
    return Settings(**overrides)


def _serve(args: argparse.Namespace) -> int:
    # Imported here so `memvm --help` and `memvm version` answer without loading the server.
    import uvicorn

    from memvm.db.database import resolve_database
    from memvm.main import create_app

    # uvicorn re-raises the SIGTERM it caught after a graceful shutdown; with the default
    # handler that kills the process before atexit stops the embedded PostgreSQL.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    settings = _settings(args)
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
    target = resolve_database(settings)
    log.info("memvm %s using %s", __version__, target.description)
    app = create_app(settings, database=target)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level)
    return 0


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _db_upgrade(args: argparse.Namespace) -> int:
    from memvm.db.database import resolve_database

    settings = _settings(args)
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


if __name__ == "__main__":
    sys.exit(main())
