"""`memvm agents import FILE.af` and `memvm agents export AGENT_ID > FILE.af`: agent files straight
against the database (as `memvm keys` works), with a progress line on stderr for large files."""

import argparse
import json
import sys
from typing import IO, TYPE_CHECKING

from memvm.cli.database import with_database
from memvm.cli.options import Commands
from memvm.cli.organization import add_org_option, organization_named

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

PROGRESS_FROM_BYTES = 1 << 20  # smaller files import too fast to need a progress line


def add_commands(commands: Commands) -> None:
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
    add_org_option(importing)
    importing.set_defaults(run=lambda args: with_database(args, import_agents))
    exporting = agent_commands.add_parser("export", help="write an agent as an agent file to stdout")
    exporting.add_argument("agent_id")
    exporting.add_argument("--scrub-messages", action="store_true", help="leave the history out")
    exporting.add_argument("--legacy", action="store_true", help="Letta's legacy single-agent format")
    exporting.add_argument("--include-archival", action="store_true", help="include archives and their passages")
    add_org_option(exporting)
    exporting.set_defaults(run=lambda args: with_database(args, export_agent))


class ProgressFile:
    """A readable binary file that reports how far each pass over it has read (the importer reads
    a file in passes: the skeleton, then the messages)."""

    def __init__(self, raw: IO[bytes], out: IO[str], size: int) -> None:
        self.raw, self.out, self.size = raw, out, size
        self.passes, self.shown = 0, -1

    def seek(self, offset: int, whence: int = 0) -> int:
        if offset == 0 and whence == 0:
            self.passes += 1
        return self.raw.seek(offset, whence)

    def read(self, size: int = -1) -> bytes:
        chunk = self.raw.read(size)
        percent = self.raw.tell() * 100 // max(self.size, 1)
        if self.size >= PROGRESS_FROM_BYTES and percent // 10 != self.shown:
            self.shown = percent // 10
            stage = "reading" if self.passes <= 1 else "importing"
            print(f"\r{stage}: {percent}% of {self.size / 2**20:.1f} MiB", end="", file=self.out, flush=True)
        return chunk


async def import_agents(args: argparse.Namespace, sessionmaker: "async_sessionmaker[AsyncSession]") -> int:
    from pathlib import Path

    from memvm.actors import Actor, Caller
    from memvm.agentfiles.importer import ImportContext, import_agent_file
    from memvm.agentfiles.schemas import ImportOptions
    from memvm.config import Settings
    from memvm.embeddings.registry import EmbedderRegistry
    from memvm.errors import DomainError

    path = Path(args.file)
    if not path.is_file():
        print(f"{args.file}: no such file", file=sys.stderr)
        return 1
    organization_id = await organization_named(sessionmaker, args.org)
    if organization_id is None:
        return 1
    await _sync_builtin_tools(sessionmaker)
    options = ImportOptions(
        name=args.name,
        model=args.model,
        embedding=args.embedding,
        strip_messages=args.strip_messages,
        truncate_blocks=args.truncate_blocks,
        skip_unpaired_messages=args.skip_unpaired_messages,
        override_existing_tools=args.override_existing_tools,
    )
    embedders = EmbedderRegistry.from_settings(Settings())
    context = ImportContext(sessionmaker, embedders, Caller(organization_id, Actor("cli")))
    try:
        with path.open("rb") as raw:
            result = await import_agent_file(context, ProgressFile(raw, sys.stderr, path.stat().st_size), options)
    except DomainError as error:
        print(f"\n{error.message}", file=sys.stderr)
        return 1
    finally:
        await embedders.aclose()
    print(file=sys.stderr)  # ends the progress line
    for line in [*(f"skipped {item.part}: {item.reason}" for item in result.skipped), *result.repairs, *result.notes]:
        print(line, file=sys.stderr)
    print("\n".join(result.agent_ids))
    return 0


async def export_agent(args: argparse.Namespace, sessionmaker: "async_sessionmaker[AsyncSession]") -> int:
    from memvm.agentfiles.exporter import export_agent as export
    from memvm.db.uow import transaction
    from memvm.errors import DomainError

    organization_id = await organization_named(sessionmaker, args.org)
    if organization_id is None:
        return 1
    try:
        async with transaction(sessionmaker, organization_id) as session:
            file = await export(
                session,
                args.agent_id,
                scrub_messages=args.scrub_messages,
                use_legacy_format=args.legacy,
                include_archival=args.include_archival,
            )
    except DomainError as error:
        print(error.message, file=sys.stderr)
        return 1
    json.dump(file, sys.stdout, indent=2, ensure_ascii=False)
    print()
    return 0


async def _sync_builtin_tools(sessionmaker: "async_sessionmaker[AsyncSession]") -> None:
    """As `memvm serve` does at start: a database no server has opened yet has no built-in tools."""
    from memvm.db.tenancy import ALL_ORGANIZATIONS
    from memvm.db.uow import transaction
    from memvm.tools.service import sync_builtin_tools

    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        await sync_builtin_tools(session)
