"""A block's history as a feature: reading it (newest first, each entry with what changed and who
changed it), the value at a version, and undo / redo / restore.

Every write already records the state it left in `block_change` (blocks/service.py). Undo, redo and
restore bring back an earlier state's content (value, description, read-only flag, metadata; the
label and limit stay as they are now) through the same write path as a PATCH: under the row lock,
with If-Match and the limit rules, as a new version with its own history entry, and recompiling
every agent that shows the block. History is never rewritten; only retention prunes it.
"""

import difflib
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.blocks import repository
from memvm.blocks.schemas import BlockHistoryEntry, HistoryActor, HistoryPage
from memvm.blocks.service import apply_changes, check_version, lock_block
from memvm.errors import InvalidInput, NotFound
from memvm.memory.undo import Change, UndoStack
from memvm.orm import Block, BlockChange

# API field → the column of a history row; what restoring brings back is the content fields.
_FIELDS = {"label": "label", "value": "value", "limit": "char_limit", "description": "description"}
_FIELDS |= {"read_only": "read_only", "metadata": "metadata_"}
_CONTENT = ("value", "description", "read_only", "metadata")


async def history(session: AsyncSession, block_id: str, page: HistoryPage) -> list[BlockHistoryEntry]:
    """Newest first. A deleted block's history stays readable (its last entry is the delete)."""
    limit, before, after, as_diff = page.limit, page.before, page.after, page.as_diff
    rows = await repository.history_rows(session, block_id, limit=limit + 1, before=before, since=after)
    if not rows:
        if not await repository.history_rows(session, block_id, limit=1, before=None, since=None):
            raise NotFound(f"Block {block_id!r} has no history (unknown id, or pruned by retention).")
        return []  # a page past either end
    predecessors = [*rows[1:], None] if rows else []  # a page past the newest version is empty
    entries = [_entry(row, previous, as_diff) for row, previous in zip(rows, predecessors, strict=True)]
    # A full page fetched one row more than it shows: the predecessor of its oldest entry.
    return [entry for entry in entries if after is None or entry.version > after][:limit]


async def version_of(session: AsyncSession, block_id: str, version: int) -> BlockChange:
    row = await repository.change_at(session, block_id, version)
    if row is None:
        raise NotFound(f"Block {block_id!r} has no version {version} (it never had it, or retention pruned it).")
    return row


_NOTHING_TO = {"undo": "it is at its oldest kept state", "redo": "no undo since its last edit"}


async def walk(
    session: AsyncSession, block_id: str, direction: Literal["undo", "redo"], *, if_match: int | None, actor: Actor
) -> Block:
    """Undo or redo, as an editor does; each is a new version."""
    block = await _locked(session, block_id, if_match)
    stack = await _stack(session, block_id)
    target = stack.undo_target() if direction == "undo" else stack.redo_target()
    if target is None:
        raise InvalidInput(f"Block {block_id!r} has nothing to {direction}: {_NOTHING_TO[direction]}.")
    return await _bring_back(session, block, target, change=direction, actor=actor)


async def restore(session: AsyncSession, block_id: str, version: int, *, if_match: int | None, actor: Actor) -> Block:
    """Like an edit: what an undo had left to redo is dropped."""
    block = await _locked(session, block_id, if_match)
    return await _bring_back(session, block, version, change="restore", actor=actor)


async def prune(session: AsyncSession, *, keep_versions: int | None, keep_days: int | None) -> int:
    """Retention, across organizations (the caller's session says so); never on a write path."""
    older_than = datetime.now(UTC) - timedelta(days=keep_days) if keep_days is not None else None
    return await repository.prune_history(session, keep_versions=keep_versions, older_than=older_than)


async def _locked(session: AsyncSession, block_id: str, if_match: int | None) -> Block:
    block = await lock_block(session, block_id)
    check_version(block, if_match)
    return block


async def _stack(session: AsyncSession, block_id: str) -> UndoStack:
    return UndoStack.replay(Change(version, change) for version, change in await repository.change_kinds(session, block_id))


async def _bring_back(session: AsyncSession, block: Block, version: int, *, change: str, actor: Actor) -> Block:
    old = await version_of(session, block.id, version)
    content = {field: getattr(old, _FIELDS[field]) for field in _CONTENT}
    return await apply_changes(session, block, content, actor=actor, change=change, restored_version=version)


def _entry(row: BlockChange, previous: BlockChange | None, as_diff: bool) -> BlockHistoryEntry:
    after = _state(row)
    before = _state(previous) if previous is not None else None
    changed = [field for field in _FIELDS if before is None or before[field] != after[field]]
    old = {field: before[field] for field in changed} if before is not None else None
    new = {field: after[field] for field in (changed if row.change != "delete" else _FIELDS)}
    diff = None
    if as_diff:
        diff = _unified_diff(before["value"] if before else "", after["value"], previous, row.version)
        new.pop("value", None)
        if old is not None:
            old.pop("value", None)
    return BlockHistoryEntry(
        version=row.version,
        change=row.change,
        created_at=row.created_at,
        changed_fields=changed,
        old=old,
        new=new,
        diff=diff,
        restored_version=row.restored_version,
        actor=HistoryActor(
            type=row.actor_type,
            id=row.actor_id,
            organization_id=row.organization_id,
            run_id=row.run_id,
            step_id=row.step_id,
            tool_call_id=row.tool_call_id,
        ),
    )


def _state(row: BlockChange) -> dict[str, Any]:
    return {field: getattr(row, column) for field, column in _FIELDS.items()}


def _unified_diff(old: str, new: str, previous: BlockChange | None, version: int) -> str:
    since = f"version {previous.version}" if previous is not None else "(nothing)"
    return "".join(
        difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), since, f"version {version}")
    )
