"""`memvm blocks history|undo|redo|restore BLOCK_ID`: a block's history, and bringing back what it
held, straight against the database (as `memvm keys` works). Each prints JSON, as the REST route
answers; the change is recorded with the actor `cli`."""

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memvm.cli_organization import organization_named

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

Work = Callable[["AsyncSession"], Awaitable[Any]]


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
