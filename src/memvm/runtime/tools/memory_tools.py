"""Handlers of the core-memory tools. Every edit goes through the blocks service's single write
path (limits, versions, history with the agent and step, recompile) on a row-locked block."""

from memvm import metrics
from memvm.agents import service as agents
from memvm.blocks import service as blocks
from memvm.blocks.schemas import BlockCreate
from memvm.conversations import service as conversations
from memvm.errors import MemoryEditError
from memvm.memory import edits
from memvm.orm import Block
from memvm.runtime.tools.context import ToolContext

READ_ONLY = "This block is read-only and cannot be edited. Leave it as it is."


async def locked_block(ctx: ToolContext, label: str, *, for_edit: bool = True) -> Block:
    block = await conversations.find_block(ctx.session, ctx.agent_id, ctx.conversation_id, label, lock=True)
    if block is None:
        labels = ", ".join(sorted(await agents.block_labels(ctx.session, ctx.agent_id))) or "none"
        raise MemoryEditError(f"There is no memory block labelled '{label}'. Your blocks are: {labels}.")
    if for_edit and block.read_only:
        metrics.BLOCK_WRITES.labels("refused_read_only").inc()
        raise MemoryEditError(f"Memory block '{label}': {READ_ONLY}")
    return block


async def write_value(ctx: ToolContext, block: Block, new_value: str) -> str:
    old_value = block.value
    await blocks.apply_changes(ctx.session, block, {"value": new_value}, actor=ctx.actor)
    diff = edits.unified_diff(block.label, old_value, new_value)
    return f"Memory block '{block.label}' updated ({len(new_value)}/{block.char_limit} characters).\n{diff}".rstrip()


async def core_memory_append(ctx: ToolContext, label: str, content: str) -> str:
    block = await locked_block(ctx, label)
    edits.check_no_line_numbers("content", content)
    return await write_value(ctx, block, edits.append(block.value, content))


async def core_memory_replace(ctx: ToolContext, label: str, old_content: str, new_content: str) -> str:
    block = await locked_block(ctx, label)
    return await write_value(ctx, block, edits.replace_all(label, block.value, old_content, new_content))


async def memory_replace(ctx: ToolContext, label: str, old_string: str, new_string: str) -> str:
    block = await locked_block(ctx, label)
    return await write_value(ctx, block, edits.replace_unique(label, block.value, old_string, new_string))


async def memory_insert(ctx: ToolContext, label: str, new_string: str, insert_line: int | None = None) -> str:
    block = await locked_block(ctx, label)
    return await write_value(ctx, block, edits.insert_lines(label, block.value, new_string, insert_line))


async def memory_rethink(ctx: ToolContext, label: str, new_memory: str) -> str:
    block = await locked_block(ctx, label)
    return await write_value(ctx, block, edits.rethink(block.value, new_memory))


async def memory_finish_edits(ctx: ToolContext) -> str:
    return "Memory edits finished."


async def memory_apply_patch(ctx: ToolContext, patch: str, label: str | None = None) -> str:
    if label is not None and not edits.is_multi_block_patch(patch):
        block = await locked_block(ctx, label)
        return await write_value(ctx, block, edits.apply_patch(label, block.value, patch))
    if not edits.is_multi_block_patch(patch):
        raise MemoryEditError("Give `label` for a single-block patch, or use '*** Update Block: <label>' sections.")
    done = [await _apply_op(ctx, op) for op in edits.parse_multi_block_patch(patch)]
    return "Patch applied:\n" + "\n".join(f"- {line}" for line in done)


async def _apply_op(ctx: ToolContext, op: edits.PatchOp) -> str:
    if op.kind == "add":
        await create_block(ctx, op.label, op.body, op.description)
        return f"added '{op.label}'"
    if op.kind == "delete":
        await remove_block(ctx, op.label)
        return f"deleted '{op.label}'"
    block = await locked_block(ctx, op.label)
    if op.kind == "move":
        await blocks.apply_changes(ctx.session, block, {"label": op.new_label or ""}, actor=ctx.actor)
        return f"moved '{op.label}' to '{op.new_label}'"
    await write_value(ctx, block, edits.apply_patch(op.label, block.value, op.body))
    return f"updated '{op.label}'"


async def create_block(ctx: ToolContext, label: str, value: str, description: str | None) -> Block:
    if await agents.find_block(ctx.session, ctx.agent_id, label, lock=False) is not None:
        raise MemoryEditError(f"A memory block labelled '{label}' already exists; edit it instead or pick another path.")
    edits.check_no_line_numbers("file_text", value)
    [block] = await blocks.create_blocks(
        ctx.session, [BlockCreate(label=label, value=value, description=description)], actor=ctx.actor
    )
    await agents.attach_block(ctx.session, ctx.agent_id, block.id)
    return block


async def remove_block(ctx: ToolContext, label: str) -> None:
    """Detach the block; delete it too when no other agent shares it (no orphans)."""
    block = await locked_block(ctx, label)
    await agents.detach_block(ctx.session, ctx.agent_id, block.id)
    if not await blocks.agents_showing(ctx.session, block.id):
        await blocks.delete_block(ctx.session, block.id, actor=ctx.actor)
