"""The `--org NAME` option of the commands that work straight against the database."""

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker


def add_org_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--org", help="organization name (default: the default organization)")


async def organization_named(sessionmaker: "async_sessionmaker[AsyncSession]", name: str | None) -> str | None:
    """The organization's id (the default organization when `name` is None), or None after saying
    on stderr that there is no such organization."""
    from memvm.accounts import service
    from memvm.actors import DEFAULT_ORGANIZATION_ID
    from memvm.db.tenancy import ALL_ORGANIZATIONS
    from memvm.db.uow import transaction

    if name is None:
        return DEFAULT_ORGANIZATION_ID
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        found = [org.id for org in await service.list_organizations(session) if org.name == name]
    if not found:
        print(f"No organization named {name!r}; `memvm keys list` shows the organizations.", file=sys.stderr)
    return found[0] if found else None
