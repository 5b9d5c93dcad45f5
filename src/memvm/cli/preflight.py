"""What `memvm serve` makes sure of before anything listens: the port is free, the database runs,
is reachable and migrated, holds this code's built-in tools, and serving on this address without
keys is allowed.

Each check fails with CannotServe, whose message is the one line the command prints (what is
wrong, and what to do) before it exits non-zero: a start that cannot serve must not bind the port
first, nor look like a success to systemd, Docker or a script.
"""

import asyncio
import logging
import socket
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from memvm.accounts import service as accounts
from memvm.accounts.exposure import ExposureRefused, check_exposure
from memvm.config import Settings
from memvm.db.database import DatabaseTarget, resolve_database
from memvm.db.engine import build_engine, build_sessionmaker
from memvm.db.migrate import upgrade_to_head
from memvm.db.postmaster import EmbeddedPostgresError
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction

log = logging.getLogger("memvm")


class CannotServe(RuntimeError):
    """`memvm serve` cannot serve; the message says why and what to do."""


def check_port(settings: Settings) -> None:
    """Whether something already listens on the address (a bind without listening tells, and is
    undone at once; uvicorn binds for real only after every other check)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a TIME_WAIT is no obstacle
        try:
            probe.bind((settings.host.strip("[]"), settings.port))
        except OSError as error:
            raise CannotServe(
                f"cannot listen on {settings.host}:{settings.port}: {error.strerror or error}. Stop whatever uses "
                "that port, or choose another with --port (MEMVM_PORT) or --host (MEMVM_HOST)."
            ) from None


def start_database(settings: Settings, meanwhile: Callable[[], None] | None = None) -> DatabaseTarget:
    """MEMVM_DATABASE_URL, or the embedded server, started (or reused) here, while `meanwhile` runs."""
    try:
        return resolve_database(settings, meanwhile)
    except EmbeddedPostgresError as error:
        raise CannotServe(str(error)) from None


def prepare_database(target: DatabaseTarget, settings: Settings) -> None:
    """Connect, migrate (MEMVM_MIGRATE_ON_START), store the built-in tools and check the exposure of the
    server, once: the HTTP processes forked afterwards skip the tools (http_processes.load_app)."""
    asyncio.run(_prepare_database(target, settings))


async def _prepare_database(target: DatabaseTarget, settings: Settings) -> None:
    engine = build_engine(target.url, settings)
    try:
        try:
            async with engine.connect():
                pass
        except (DBAPIError, OSError) as error:
            raise CannotServe(
                f"cannot connect to the {target.description}: {_reason(error)}. Check that it runs and accepts "
                "connections from here, and MEMVM_DATABASE_URL."
            ) from None
        if settings.migrate_on_start:
            await _migrate(engine, target)
        sessionmaker = build_sessionmaker(engine)
        await _sync_builtin_tools(sessionmaker)
        await _check_exposure(sessionmaker, settings)
    finally:
        await engine.dispose()


async def _migrate(engine: AsyncEngine, target: DatabaseTarget) -> None:
    try:
        await upgrade_to_head(engine)
    except Exception as error:  # whatever went wrong, the one line says it; MEMVM_LOG_LEVEL=debug shows where
        log.debug("migration failed", exc_info=True)
        raise CannotServe(
            f"migrating the {target.description} to the latest schema failed: {_reason(error)}. A database written by "
            "a newer memvm needs that version; otherwise `memvm db upgrade` shows the migration's progress."
        ) from None


async def _sync_builtin_tools(sessionmaker: "async_sessionmaker[AsyncSession]") -> None:
    # Imported here: preflight loads before the app's modules, which load while the database starts.
    from memvm.tools.service import sync_builtin_tools

    try:
        async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
            await sync_builtin_tools(session)
    except DBAPIError as error:
        raise CannotServe(
            f"cannot store the built-in tools: {_reason(error)}. Is the database migrated (`memvm db upgrade`)?"
        ) from None


async def _check_exposure(sessionmaker: "async_sessionmaker[AsyncSession]", settings: Settings) -> None:
    keys_required = bool(settings.admin_api_key)  # as the app reads it: an empty key is none
    if not keys_required:
        try:
            async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
                keys_required = await accounts.any_key_exists(session)
        except DBAPIError as error:
            raise CannotServe(
                f"cannot read the API keys: {_reason(error)}. Is the database migrated (`memvm db upgrade`)?"
            ) from None
    try:
        check_exposure(settings, keys_required)
    except ExposureRefused as refused:
        raise CannotServe(str(refused)) from None


def _reason(error: BaseException) -> str:
    """The driver's own error in one line (SQLAlchemy's text adds the statement and a link)."""
    cause = getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0]}" if lines else type(cause).__name__
