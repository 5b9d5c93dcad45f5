"""`memvm` command line: serve, db upgrade, keys, agents import/export, backup/restore, version."""

import argparse
import asyncio
import atexit
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from memvm import __version__, blocks_cli
from memvm import agent_files_cli as agent_files
from memvm import backup as backups
from memvm.accounts.names import check_key_label, check_organization_name
from memvm.config import Settings
from memvm.memory.rules import MAX_VERSION
from memvm.processes import configure_logging

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

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
    serve.add_argument(
        "--insecure",
        action="store_const",
        const=True,
        help="allow a non-loopback host without any API key (MEMVM_INSECURE); anyone who reaches it has full access",
    )
    serve.add_argument("--workers", type=int, help="HTTP processes sharing the port (default: one per core, or MEMVM_WORKERS)")
    serve.set_defaults(run=_serve)
    worker = commands.add_parser(
        "worker", help="embed stored messages in the background, alone (`memvm serve` starts one itself by default)"
    )
    worker.set_defaults(run=_worker)

    keys = commands.add_parser("keys", help="API keys (in MEMVM_DATABASE_URL, or the embedded database when no server holds it)")
    key_commands = keys.add_subparsers(title="keys commands")
    create = key_commands.add_parser("create", help="create a key for an organization (created on first use); prints the key")
    create.add_argument("--org", required=True, type=_checked(check_organization_name), help="organization name")
    create.add_argument("--name", default="", type=_checked(check_key_label), help="a label to recognise the key by")
    create.set_defaults(run=lambda args: _with_accounts(args, _create_key))
    listing = key_commands.add_parser("list", help="list keys (never their secrets)")
    listing.set_defaults(run=lambda args: _with_accounts(args, _list_keys))
    revoke = key_commands.add_parser("revoke", help="revoke a key at once, on every server")
    revoke.add_argument("id", help="the key's id (apikey-...)")
    revoke.set_defaults(run=lambda args: _with_accounts(args, _revoke_key))

    _agent_file_commands(commands)
    _block_commands(commands)
    _backup_commands(commands)

    db = commands.add_parser("db", help="database maintenance").add_subparsers(title="db commands")
    upgrade = db.add_parser("upgrade", help="migrate the database to the latest schema, printing current → target")
    upgrade.set_defaults(run=_db_upgrade)

    version = commands.add_parser("version", help="print the memvm version")
    version.set_defaults(run=lambda args: print(f"memvm {__version__}") or 0)
    return parser


def _agent_file_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    agents = commands.add_parser("agents", help="agent files (.af), in the same database as `memvm keys`")
    agent_commands = agents.add_subparsers(title="agents commands")
    importing = agent_commands.add_parser("import", help="import a Letta or memvm agent file; prints the new agent ids")
    importing.add_argument("file", help="the .af file")
    importing.add_argument("--model", help="model handle for the imported agents (e.g. openai/gpt-4o-mini)")
    importing.add_argument("--embedding", help="embedding handle for the imported agents")
    importing.add_argument("--name", help="a new name for the imported agents")
    importing.add_argument("--strip-messages", action="store_true", help="leave the history out")
    importing.add_argument("--truncate-blocks", action="store_true", help="cut over-limit block values")
    importing.add_argument("--skip-unpaired-messages", action="store_true", help="drop unanswered tool calls")
    importing.add_argument("--override-existing-tools", action="store_true", help="replace same-named custom tools")
    importing.add_argument("--org", help="organization name (default: the default organization)")
    importing.set_defaults(run=lambda args: _with_database(args, agent_files.import_agents))
    exporting = agent_commands.add_parser("export", help="write an agent as an agent file to stdout")
    exporting.add_argument("agent_id")
    exporting.add_argument("--scrub-messages", action="store_true", help="leave the history out")
    exporting.add_argument("--legacy", action="store_true", help="Letta's legacy single-agent format")
    exporting.add_argument("--include-archival", action="store_true", help="include archives and their passages")
    exporting.add_argument("--org", help="organization name (default: the default organization)")
    exporting.set_defaults(run=lambda args: _with_database(args, agent_files.export_agent))


def _block_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    blocks = commands.add_parser("blocks", help="a block's history and undo, in the same database as `memvm keys`")
    block_commands = blocks.add_subparsers(title="blocks commands")
    history = block_commands.add_parser("history", help="the block's changes, newest first, as JSON")
    history.add_argument("block_id")
    history.add_argument("--limit", type=_int_between(1, 1000), default=50, help="entries at most (default 50)")
    history.add_argument("--before", type=_int_between(0, MAX_VERSION), help="only versions below this one (the next page)")
    history.add_argument("--diff", action="store_true", help="the value as a unified diff")
    history.set_defaults(run=lambda args: _with_database(args, blocks_cli.show_history))
    helps = {
        "undo": "bring back the content before the last edit (a new version)",
        "redo": "bring back what the last undo took away",
        "restore": "bring back the content of VERSION (a new version)",
    }
    for change, text in helps.items():
        command = block_commands.add_parser(change, help=text)
        command.add_argument("block_id")
        if change == "restore":
            command.add_argument("version", type=_int_between(1, MAX_VERSION))
        command.add_argument("--if-match", type=_int_between(0, MAX_VERSION), help="refuse unless the block is at this version")
        command.set_defaults(run=lambda args: _with_database(args, blocks_cli.bring_back), change=change)
    for command in (history, *(block_commands.choices[change] for change in helps)):
        command.add_argument("--org", help="organization name (default: the default organization)")


def _checked(check: Callable[[str], str]) -> Callable[[str], str]:
    """An argparse type from a check that raises ValueError: a usage error that says what is wrong."""

    def parse(text: str) -> str:
        try:
            return check(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _int_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high], or a usage error that says so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse


def _backup_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    backup = commands.add_parser("backup", help="write the whole database to FILE with pg_dump (also while `memvm serve` runs)")
    backup.add_argument("file", help="the backup file to write (pg_dump's custom format)")
    backup.set_defaults(run=backups.backup_command)
    restore = commands.add_parser("restore", help="load a `memvm backup` FILE into an empty database, then migrate it")
    restore.add_argument("file", help="a file written by `memvm backup`")
    restore.add_argument("--force", action="store_true", help="replace everything in a non-empty database (drops its schema)")
    restore.set_defaults(run=backups.restore_command)


def _settings(args: argparse.Namespace) -> Settings:
    given = ("host", "port", "insecure", "workers")
    overrides = {key: value for key in given if (value := getattr(args, key, None)) is not None}
    return Settings(**overrides)


def _serve(args: argparse.Namespace) -> int:
    # Imported here so `memvm --help` and `memvm version` answer without loading the server.
    from memvm.preflight import CannotServe
    from memvm.serving import run_http, share_metrics

    # uvicorn re-raises the SIGTERM it caught after a graceful shutdown; with the default
    # handler that kills the process before atexit stops the embedded PostgreSQL.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    settings = _settings(args)
    configure_logging(settings.log_level)
    try:
        target = _prepare_to_serve(settings)
    except CannotServe as error:
        print(f"memvm serve: {error}", file=sys.stderr)
        return 1
    settings = settings.model_copy(update={"migrate_on_start": False})  # done, once, above
    if settings.embedding_worker and settings.embedding_process:
        share_metrics()  # the worker's metrics are the server's too
        from memvm.worker import start_worker_process, stop_worker_process

        worker = start_worker_process(target.url)
        atexit.register(stop_worker_process, worker)  # registered after the embedded server's stop: runs before it
        settings = settings.model_copy(update={"embedding_worker": False})  # the worker process embeds
    run_http(settings, target)
    return 0


def _prepare_to_serve(settings: Settings) -> "DatabaseTarget":
    """Everything that can keep the server from serving, before anything listens (memvm.preflight)."""
    from memvm import preflight
    from memvm.serving import http_processes

    preflight.check_port(settings)
    target = preflight.start_database(settings)
    log.info("memvm %s using %s, %d HTTP process(es)", __version__, target.description, http_processes(settings))
    if settings.ui:
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        log.info("operator console: http://%s:%d/ui/ (MEMVM_UI=false turns it off)", host, settings.port)
    preflight.prepare_database(target, settings)
    return target


def _worker(args: argparse.Namespace) -> int:
    from memvm.db.database import resolve_database
    from memvm.worker import serve_worker

    settings = _settings(args)
    configure_logging(settings.log_level)
    advice = "`memvm serve` runs its own embedding worker (MEMVM_EMBEDDING_PROCESS); one alone needs MEMVM_DATABASE_URL."
    if _embedded_database_held(settings, advice):
        return 1
    return serve_worker(resolve_database(settings).url, settings)


def _embedded_database_held(settings: Settings, advice: str) -> bool:
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


DatabaseCommand = Callable[[argparse.Namespace, "async_sessionmaker[AsyncSession]"], Awaitable[int]]
AccountsCommand = Callable[[argparse.Namespace, "AsyncSession"], Awaitable[int]]


def _with_database(args: argparse.Namespace, command: DatabaseCommand) -> int:
    """Run `command` against MEMVM_DATABASE_URL, or the embedded database when no server holds it."""
    from memvm.db.database import resolve_database

    settings = _settings(args)
    advice = (
        "this command cannot open it. Stop `memvm serve` and run it again, or use the running server's API "
        "(the admin API for keys, POST /v1/agents/import and GET /v1/agents/{id}/export for agent files)."
    )
    if _embedded_database_held(settings, advice):
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


def _with_accounts(args: argparse.Namespace, command: AccountsCommand) -> int:
    async def in_one_transaction(args: argparse.Namespace, sessionmaker: "async_sessionmaker[AsyncSession]") -> int:
        from memvm.db.tenancy import ALL_ORGANIZATIONS
        from memvm.db.uow import transaction

        async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
            return await command(args, session)

    return _with_database(args, in_one_transaction)


async def _create_key(args: argparse.Namespace, session: "AsyncSession") -> int:
    from memvm.accounts import service

    created = await service.create_key(session, args.org, args.name)
    print(f"created {created.id} in organization {created.organization!r}; the key is shown only now:", file=sys.stderr)
    print(created.key)
    return 0


async def _list_keys(args: argparse.Namespace, session: "AsyncSession") -> int:
    from memvm.accounts import service

    for key in await service.list_keys(session):
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        print(f"{key.id}  {key.prefix}…  {key.organization}  {key.name or '-'}  {state}")
    return 0


async def _revoke_key(args: argparse.Namespace, session: "AsyncSession") -> int:
    from memvm.accounts import service
    from memvm.errors import NotFound

    try:
        await service.revoke_key(session, args.id)
    except NotFound as error:
        print(error.message, file=sys.stderr)
        return 1
    print(f"revoked {args.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
