"""The single write path for blocks: REST handlers (and later the agent's tools) all come here.

Every write locks the block row, checks the expected version, enforces label and limit rules,
bumps `version`, records a BlockChange, and recompiles every agent the change affects — all in
the caller's transaction.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.actors import Actor
from memvm.blocks import repository
from memvm.blocks.schemas import BlockCreate, BlockUpdate
from memvm.db.conflicts import conflict_on
from memvm.db.pagination import NamePage, PageRequest, fetch_page
from memvm.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from memvm.ids import new_id
from memvm.memory import rules
from memvm.orm import Block, BlockChange
from memvm.prompts.service import recompile_agents

# Changing any of these changes what the agent sees in its prompt.
PROMPT_FIELDS = frozenset({"label", "value", "char_limit", "description", "read_only"})
_COLUMN_OF_FIELD = {"limit": "char_limit", "metadata": "metadata_"}


def new_block(data: BlockCreate) -> Block:
    """A validated, not yet stored Block."""
    label = rules.check_label(data.label)
    value = rules.clean_value(data.value)
    rules.check_fits(label, value, rules.check_limit(data.limit))
    return Block(
        id=new_id("block"),
        label=label,
        value=value,
        char_limit=data.limit,
        description=rules.default_description(label, data.description),
        read_only=data.read_only,
        hidden=data.hidden,
        metadata_=data.metadata,
        tags=data.tags,
        version=1,
    )


async def create_blocks(
    session: AsyncSession, specs: Sequence[BlockCreate], *, actor: Actor, versions: Sequence[int | None] = ()
) -> list[Block]:
    """Validate every spec first, so one bad block stores none. `versions` (agent-file import) lets a
    block keep the version it had on the server it came from."""
    created = [new_block(spec) for spec in specs]
    for block, version in zip(created, versions, strict=False):
        block.version = version or block.version
    return await repository.insert_new(session, created, actor=actor)


# A new agent is stored with its blocks in one statement (agents/repository.py): these are the
# blocks' writes in it and the blocks as it stores them (the table's columns).
NEW_BLOCK_WRITES = repository.NEW_BLOCK_WRITES
STORED_BLOCKS = repository.STORED_BLOCKS


def new_block_parameters(
    session: AsyncSession, created: Sequence[Block], *, actor: Actor, attach_to: str, attached: Sequence[Block]
) -> dict[str, Any]:
    """NEW_BLOCK_WRITES' parameters: store `created` (made by `new_block`) with their history, and
    attach them, then `attached`, to the agent `attach_to` in that order."""
    links = [(attach_to, block.id, block.label) for block in [*created, *attached]]
    return repository.new_block_parameters(session, created, actor=actor, links=links)


async def get_block(session: AsyncSession, block_id: str) -> Block:
    block = await repository.get(session, block_id)
    if block is None:
        raise NotFound(f"Block {block_id!r} not found.")
    return block


async def block_tags(session: AsyncSession, page: NamePage) -> list[str]:
    """One page of the tags of the organization's blocks."""
    return await repository.tags(session, page)


async def list_blocks(
    session: AsyncSession,
    page: PageRequest,
    *,
    label: str | None = None,
    tags: Sequence[str] = (),
    match_all_tags: bool = False,
    value_search: str | None = None,
    among: Select[tuple[str]] | None = None,
) -> list[Block]:
    """`among`: only blocks whose ids this query selects (an identity's blocks)."""
    query = repository.list_query(label=label, tags=tags, match_all_tags=match_all_tags, value_search=value_search, among=among)
    return await fetch_page(session, query, Block, page)


async def update_block(
    session: AsyncSession,
    block_id: str,
    update: BlockUpdate,
    *,
    if_match: int | None = None,
    actor: Actor,
) -> Block:
    """Apply `update` under the block's row lock. Raises PreconditionFailed if `if_match` is not
    the current version, InvalidInput if the result breaks a rule, Conflict on a label clash."""
    return await update_locked_block(session, await lock_block(session, block_id), update, if_match=if_match, actor=actor)


async def update_locked_block(
    session: AsyncSession, block: Block, update: BlockUpdate, *, if_match: int | None, actor: Actor
) -> Block:
    """`update_block` of a block the caller has row-locked."""
    check_version(block, if_match)
    return await apply_changes(session, block, update.changes(), actor=actor)


async def lock_block(session: AsyncSession, block_id: str) -> Block:
    block = await repository.get(session, block_id, lock=True)
    if block is None:
        raise NotFound(f"Block {block_id!r} not found.")
    return block


async def apply_changes(
    session: AsyncSession,
    block: Block,
    requested: dict[str, Any],
    *,
    actor: Actor,
    change: str = "update",
    restored_version: int | None = None,
) -> Block:
    """Write API-named field changes to a block the caller has locked: rules, version bump,
    history row, and a recompile of every agent that shows the block. An update that changes
    nothing is not a version; an undo, redo or restore always is (it moves the undo position)."""
    try:
        changes = _validated_changes(block, requested)
    except InvalidInput:
        metrics.BLOCK_WRITES.labels("refused_invalid").inc()  # over the limit, a bad label, …
        raise
    if not changes and change == "update":
        return block
    if "label" in changes:
        await _check_label_free(session, await repository.attached_agent_ids(session, block.id), changes["label"])
    label = changes.get("label", block.label)
    clash = f"Label {label!r} is already used by another block of an agent this block is attached to."
    with conflict_on("uq_agent_block_agent_id_label", clash):
        agent_ids = await repository.write_changes(
            session, block, changes, change=change, actor=actor, restored_version=restored_version
        )
    metrics.BLOCK_WRITES.labels("written").inc()
    if PROMPT_FIELDS & changes.keys():
        await recompile_agents(session, agent_ids)
    return block


async def changes_after(session: AsyncSession, after: Mapping[str, int]) -> list[BlockChange]:
    """The history rows of each block past the version given for it (0: all), oldest first."""
    return await repository.changes_after(session, after)


async def agents_showing(session: AsyncSession, block_id: str) -> list[str]:
    """Ids of the agents the block is attached to."""
    return await repository.attached_agent_ids(session, block_id)


async def delete_block(session: AsyncSession, block_id: str, *, actor: Actor) -> None:
    """Delete the block everywhere; every agent it was attached to is recompiled without it."""
    block = await lock_block(session, block_id)
    agent_ids = await repository.attached_agent_ids(session, block.id)
    await repository.record_change(session, block, change="delete", actor=actor)
    await session.delete(block)
    await session.flush()
    await recompile_agents(session, agent_ids)


def check_version(block: Block, if_match: int | None) -> None:
    if if_match is not None and if_match != block.version:
        metrics.BLOCK_WRITES.labels("refused_version").inc()
        raise PreconditionFailed(
            f"Block {block.id!r} is at version {block.version}, but If-Match expected version {if_match}. "
            "Someone changed it since you read it: re-read the block and retry with its current version."
        )


def _validated_changes(block: Block, requested: dict[str, Any]) -> dict[str, Any]:
    """Map API fields to columns, check the rules on the resulting block, drop no-op fields."""
    changes = {_COLUMN_OF_FIELD.get(field, field): value for field, value in requested.items()}
    if "label" in changes:
        rules.check_label(changes["label"])
    if "value" in changes:
        changes["value"] = rules.clean_value(changes["value"])
    label = changes.get("label", block.label)
    value = changes.get("value", block.value)
    limit = rules.check_limit(changes.get("char_limit", block.char_limit))
    if "value" in changes:
        rules.check_fits(label, value, limit)
    else:
        rules.check_limit_holds_value(label, value, limit)
    return {column: new for column, new in changes.items() if getattr(block, column) != new}


async def _check_label_free(session: AsyncSession, agent_ids: Sequence[str], label: str) -> None:
    clashing = await repository.agents_with_label(session, agent_ids, label)
    if clashing:
        raise Conflict(
            f"Cannot rename block to {label!r}: agent {clashing[0]!r} already has a block with that label. "
            "Labels must be unique per agent; pick another label or detach the other block first."
        )
