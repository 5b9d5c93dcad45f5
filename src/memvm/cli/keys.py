"""`memvm keys create|list|revoke`: API keys, straight against the database, in one transaction
across organizations."""

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from memvm.accounts.names import check_key_label, check_organization_name
from memvm.cli.database import with_database
from memvm.cli.options import Commands, checked

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

AccountsCommand = Callable[[argparse.Namespace, "AsyncSession"], Awaitable[int]]


def add_commands(commands: Commands) -> None:
    keys = commands.add_parser("keys", help="API keys (in MEMVM_DATABASE_URL, or the embedded database when no server holds it)")
    key_commands = keys.add_subparsers(title="keys commands")
    create = key_commands.add_parser("create", help="create a key for an organization (created on first use); prints the key")
    create.add_argument("--org", required=True, type=checked(check_organization_name), help="organization name")
    create.add_argument("--name", default="", type=checked(check_key_label), help="a label to recognise the key by")
    create.set_defaults(run=lambda args: _with_accounts(args, _create_key))
    listing = key_commands.add_parser("list", help="list keys (never their secrets)")
    listing.set_defaults(run=lambda args: _with_accounts(args, _list_keys))
    revoke = key_commands.add_parser("revoke", help="revoke a key at once, on every server")
    revoke.add_argument("id", help="the key's id (apikey-...)")
    revoke.set_defaults(run=lambda args: _with_accounts(args, _revoke_key))


def _with_accounts(args: argparse.Namespace, command: AccountsCommand) -> int:
    async def in_one_transaction(args: argparse.Namespace, sessionmaker: "async_sessionmaker[AsyncSession]") -> int:
        from memvm.db.tenancy import ALL_ORGANIZATIONS
        from memvm.db.uow import transaction

        async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
            return await command(args, session)

    return with_database(args, in_one_transaction)


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
