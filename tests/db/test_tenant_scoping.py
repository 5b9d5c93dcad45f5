"""The tenancy filter (db/tenancy.py) keeps each organization's scoped copy of a statement and its
criteria from one execution to the next. Two organizations taking turns in one process must each
still see only their own rows (and the shared ones), whether the statement is built once (a
repository's constant) or per call."""

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.actors import Actor
from memvm.blocks import repository as block_rows
from memvm.blocks import service as blocks
from memvm.blocks.schemas import BlockCreate
from memvm.db.pagination import PageRequest
from memvm.db.uow import transaction
from memvm.tools import service as tools
from memvm.tools.schemas import ToolCreate

ORGANIZATIONS = ("org-tenancy-a", "org-tenancy-b")
SOURCE = '''def {name}() -> str:
    """Says hello.

    Returns:
        str: a greeting
    """
    return "hello"
'''


async def _own_rows(sessionmaker: async_sessionmaker[AsyncSession], organization_id: str) -> tuple[str, str]:
    """A block and a custom tool of the organization, both named after it; their ids."""
    label = organization_id.replace("-", "_")
    async with transaction(sessionmaker, organization_id) as session:
        [block] = await blocks.create_blocks(session, [BlockCreate(label=label, value=organization_id)], actor=Actor("local"))
        tool = await tools.create_tool(session, ToolCreate(source_code=SOURCE.format(name=label)))
        return block.id, tool.id


async def test_organizations_taking_turns_each_see_only_their_own_rows(sessionmaker, db: asyncpg.Connection):
    for organization_id in ORGANIZATIONS:
        await db.execute("INSERT INTO organization (id, name) VALUES ($1, $2)", organization_id, organization_id)
    own = {organization_id: await _own_rows(sessionmaker, organization_id) for organization_id in ORGANIZATIONS}

    for organization_id in ORGANIZATIONS * 3:
        [other] = [theirs for theirs in ORGANIZATIONS if theirs != organization_id]
        async with transaction(sessionmaker, organization_id) as session:
            # built once (blocks/repository.py's _BY_ID), then per call
            by_id = [await block_rows.get(session, own[name][0]) for name in (organization_id, other)]
            listed = await blocks.list_blocks(session, PageRequest(limit=50))
            named = await tools.tools_named(session, ["send_message", *(name.replace("-", "_") for name in ORGANIZATIONS)])

        assert [block.id if block else None for block in by_id] == [own[organization_id][0], None]
        assert [block.id for block in listed] == [own[organization_id][0]]
        assert {tool.id for tool in named.values() if tool.organization_id} == {own[organization_id][1]}
        assert "send_message" in named  # shared: every organization's
