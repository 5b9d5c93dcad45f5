"""The `memory` omni-tool: blocks addressed as files under /memories/."""

from memvm.agents import service as agents
from memvm.blocks import service as blocks
from memvm.errors import MemoryEditError
from memvm.memory import edits
from memvm.runtime.tools.context import ToolContext
from memvm.runtime.tools.memory_tools import create_block, locked_block, remove_block, write_value

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


async def memory(
    ctx: ToolContext,
    command: str,
    path: str | None = None,
    file_text: str | None = None,
    description: str | None = None,
    old_string: str | None = None,
    new_string: str | None = None,
    insert_line: int | None = None,
    insert_text: str | None = None,
    old_path: str | None = None,
    new_path: str | None = None,
) -> str:
    if command == "view":
        return await _view(ctx, path)
    if command == "create":
        label = _label(_required(path, "path", command))
        await create_block(ctx, label, file_text or "", _required(description, "description", command))
        return f"Created memory block '{label}'. It appears in your core memory from your next turn on."
    if command == "str_replace":
        label = _label(_required(path, "path", command))
        block = await locked_block(ctx, label)
        old = _required(old_string, "old_string", command)
        return await write_value(ctx, block, edits.replace_unique(label, block.value, old, new_string or ""))
    if command == "insert":
        label = _label(_required(path, "path", command))
        block = await locked_block(ctx, label)
        text = _required(insert_text, "insert_text", command)
        return await write_value(ctx, block, edits.insert_lines(label, block.value, text, insert_line, field="insert_text"))
    if command == "delete":
        label = _label(_required(path, "path", command))
        await remove_block(ctx, label)
        return f"Deleted memory block '{label}'."
    if command == "rename":
        return await _rename(ctx, path, description, old_path, new_path)
    raise MemoryEditError(f"Unknown command '{command}'. Supported commands: {', '.join(COMMANDS)}.")


async def _view(ctx: ToolContext, path: str | None) -> str:
    if path is None or path.strip("/") in ("", "memories"):
        listing = [
            f"- /memories/{block.label} ({len(block.value)}/{block.char_limit} chars)"
            + (f": {block.description}" if block.description else "")
            for block in await agents.agent_blocks(ctx.session, ctx.agent_id)
        ]
        return "Memory blocks:\n" + ("\n".join(listing) if listing else "(none)")
    block = await locked_block(ctx, _label(path), for_edit=False)
    return edits.view(block.label, block.value)


async def _rename(ctx: ToolContext, path: str | None, description: str | None, old_path: str | None, new_path: str | None) -> str:
    if old_path is not None and new_path is not None:
        old_label, new_label = _label(old_path), _label(new_path)  # apply_changes checks the label
        block = await locked_block(ctx, old_label)
        await blocks.apply_changes(ctx.session, block, {"label": new_label}, actor=ctx.actor)
        return f"Renamed memory block '{old_label}' to '{new_label}'."
    if path is not None and description is not None:
        label = _label(path)
        block = await locked_block(ctx, label)
        await blocks.apply_changes(ctx.session, block, {"description": description}, actor=ctx.actor)
        return f"Updated the description of memory block '{label}'."
    raise MemoryEditError("rename needs old_path and new_path (to relabel), or path and description (to redescribe).")


def _label(path: str) -> str:
    return edits.label_from_path(path)


def _required(value: str | None, name: str, command: str) -> str:
    if value is None:
        raise MemoryEditError(f"`{name}` is required for the {command} command.")
    return value
