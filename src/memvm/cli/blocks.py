"""`memvm blocks history|undo|redo|restore BLOCK_ID`: a block's history, and bringing back what it
held, straight against the database (as `memvm keys` works). Each prints JSON, as the REST route
answers; the change is recorded with the actor `cli`."""

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memvm.cli.database import with_database
from memvm.cli.options import Commands, int_between
from memvm.cli.organization import add_org_option, organization_named
from memvm.memory.rules import MAX_VERSION

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

Work = Callable[["AsyncSession"], Awaitable[Any]]

CHANGES = {
    "undo": "bring back the content before the last edit (a new version)",
    "redo": "bring back what the last undo took away",
    "restore": "bring back the content of VERSION (a new version)",
}


def add_commands(commands: Commands) -> None:
    blocks = commands.add_parser("blocks", help="a block's history and undo, in the same database as `memvm keys`")
    block_commands = blocks.add_subparsers(title="blocks commands")
    history = block_commands.add_parser("history", help="the block's changes, newest first, as JSON")
    history.add_argument("block_id")
    history.add_argument("--limit", type=int_between(1, 1000), default=50, help="entries at most (default 50)")
    history.add_argument("--before", type=int_between(0, MAX_VERSION), help="only versions below this one (the next page)")
    history.add_argument("--diff", action="store_true", help="the value as a unified diff")
    add_org_option(history)
    history.set_defaults(run=lambda args: with_database(args, show_history))
    for change, text in CHANGES.items():
        command = block_commands.add_parser(change, help=text)
        command.add_argument("block_id")
        if change == "restore":
            command.add_argument("version", type=int_between(1, MAX_VERSION))
        command.add_argument("--if-match", type=int_between(0, MAX_VERSION), help="refuse unless the block is at this version")
        add_org_option(command)
        command.set_defaults(run=lambda args: with_database(args, bring_back), change=change)


async def show_history(args: argparse.Namespace, sessionmaker: "async_sessionmaker[AsyncSession]") -> int:
    from memvm.blocks import history
    from memvm.blocks.schemas import HistoryPage

    page = HistoryPage(limit=args.limit, before=args.before, after=None, as_diff=args.diff)
    return await _in_organization(args, sessionmaker, lambda session: history.history(session, args.block_id, page))


async def bring_back(args: argparse.Namespace, sessionmaker: "async_sessionmaker[AsyncSession]") -> int:
    """undo, redo or restore (args.change), under the same rules as the REST routes."""
    from memvm.actors import Actor
    from memvm.blocks import history
    from memvm.blocks.schemas import BlockRead

    async def work(session: "AsyncSession") -> BlockRead:
        actor, if_match = Actor("cli"), args.if_match
        if args.change == "restore":
            block = await history.restore(session, args.block_id, args.version, if_match=if_match, actor=actor)
        else:
            block = await history.walk(session, args.block_id, args.change, if_match=if_match, actor=actor)
        return BlockRead.of(block)

    return await _in_organization(args, sessionmaker, work)


async def _in_organization(args: argparse.Namespace, sessionmaker: "async_sessionmaker[AsyncSession]", work: Work) -> int:
    """One transaction in the --org organization; a refusal is printed on stderr, exit status 1."""
    from pydantic import TypeAdapter

    from memvm.db.uow import transaction
    from memvm.errors import DomainError

    organization_id = await organization_named(sessionmaker, args.org)
    if organization_id is None:
        return 1
    try:
        async with transaction(sessionmaker, organization_id) as session:
            result = await work(session)
    except DomainError as error:
        print(error.message, file=sys.stderr)
        return 1
    print(json.dumps(TypeAdapter(Any).dump_python(result, mode="json"), indent=2, ensure_ascii=False))
    return 0
