"""Which blocks an agent has: the checks and writes of block_ids on agent create and update."""

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents import repository
from memvm.db.conflicts import flush_or_conflict
from memvm.errors import Conflict, InvalidInput, NotFound
from memvm.orm import Agent, AgentBlock, Block

LABEL_CONSTRAINT = "uq_agent_block_agent_id_label"


async def locked_blocks(session: AsyncSession, block_ids: Sequence[str]) -> list[Block]:
    """The blocks, in the order given, locked against delete/relabel; NotFound names the missing ones."""
    if not block_ids:
        return []
    if len(set(block_ids)) != len(block_ids):
        raise InvalidInput("block_ids lists a block more than once; list each block once.")
    found = {block.id: block for block in await repository.lock_blocks(session, block_ids)}
    missing = [block_id for block_id in block_ids if block_id not in found]
    if missing:
        raise NotFound(f"Blocks not found: {', '.join(missing)}.")
    return [found[block_id] for block_id in block_ids]


def check_unique_labels(labels: Sequence[str]) -> None:
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise Conflict(
                f"Two blocks share the label {label!r}; an agent's labels must be unique. "
                "Rename one of them or drop it from the request."
            )
        seen.add(label)


def label_clash(agent_id: str, block: Block, *, holder_id: str) -> Conflict:
    return Conflict(
        f"Agent {agent_id!r} already has a block labelled {block.label!r} ({holder_id}); cannot attach {block.id}. "
        "Detach that block first or rename one of them."
    )


async def replace_blocks(session: AsyncSession, agent: Agent, new_blocks: Sequence[Block]) -> None:
    check_unique_labels([block.label for block in new_blocks])
    keep = [block.id for block in new_blocks]
    await repository.detach_all_except(session, agent.id, keep)
    for block in new_blocks:
        if await repository.attachment(session, agent.id, block.id) is None:
            session.add(AgentBlock(agent_id=agent.id, block_id=block.id, label=block.label))
            await flush_or_conflict(
                session, LABEL_CONSTRAINT, f"Agent {agent.id!r} already has a block labelled {block.label!r}."
            )
