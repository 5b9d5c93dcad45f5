"""Render core-memory blocks into the text the model reads, and splice it into the system prompt.

Everything here is a pure function of its arguments: no I/O, no clock. The caller
chooses the render mode and passes the already-rendered ``<memory_metadata>`` text
(see ``memvm.memory.metadata``).

Block values and descriptions are emitted verbatim, without XML escaping: the model
reads plain text, and escaping would make edit tools' ``old_str`` matching fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from memvm.memory.memfs_layout import SYSTEM_DIR, block_path


class RenderMode(StrEnum):
    STANDARD = "standard"
    LINE_NUMBERED = "line_numbered"
    GIT = "git"


@dataclass(frozen=True)
class BlockView:
    """The parts of a block the compiler needs. Sequences of these are in attachment order."""

    label: str
    value: str
    limit: int
    description: str | None = None
    read_only: bool = False


CORE_MEMORY_PLACEHOLDER = "{CORE_MEMORY}"
LINE_NUMBER_WARNING = (
    "# NOTE: Line numbers shown below (with arrows like '1→') are to help during editing. "
    "Do NOT include line number prefixes in your memory edit tool calls."
)

_BLOCKS_INTRO = "The following memory blocks are currently engaged in your core memory unit:"
_GIT_REMINDER = "Reminder: <projection> contains the local path of the memory file projection."
_PERSONA_PATH = (SYSTEM_DIR, "persona")
_INDENT = "  "


def compile_system_prompt(
    *, system: str, blocks: Sequence[BlockView], mode: RenderMode, metadata: str, directories: str = ""
) -> str:
    """Build the full system prompt: the agent's ``system`` text plus the memory section.

    memory = render_blocks(...), the rendered ``<directories>`` (see ``memvm.memory.files_view``) and
    metadata, those that are not empty, separated by blank lines.
    Every ``{CORE_MEMORY}`` in ``system`` is replaced by memory; without a placeholder,
    memory is appended after a blank line.
    """
    memory = "\n\n".join(part for part in (render_blocks(blocks, mode), directories, metadata) if part)
    if CORE_MEMORY_PLACEHOLDER in system:
        return system.replace(CORE_MEMORY_PLACEHOLDER, memory)
    return f"{system}\n\n{memory}"


def render_blocks(blocks: Sequence[BlockView], mode: RenderMode) -> str:
    """Render blocks (attachment order) in the given view. See the ``_render_*`` helpers for each layout."""
    mode = RenderMode(mode)
    if mode is RenderMode.GIT:
        return _render_git(blocks)
    if mode is RenderMode.STANDARD and not blocks:
        # Standard drops the wrapper entirely; line-numbered keeps it even when empty.
        return ""
    return _render_memory_blocks(blocks, line_numbered=mode is RenderMode.LINE_NUMBERED)


# --- standard / line-numbered -------------------------------------------------------------------


def _render_memory_blocks(blocks: Sequence[BlockView], *, line_numbered: bool) -> str:
    """``<memory_blocks>`` wrapper; each section ends in a newline, so joining on "\\n" leaves a blank line between."""
    sections = "\n".join(_render_block_section(block, line_numbered=line_numbered) for block in blocks)
    return f"<memory_blocks>\n{_BLOCKS_INTRO}\n\n{sections}\n</memory_blocks>"


def _render_block_section(block: BlockView, *, line_numbered: bool) -> str:
    lines = [f"<{block.label}>", "<description>", block.description or "", "</description>", "<metadata>"]
    if block.read_only:
        lines.append("- read_only=true")
    lines += [f"- chars_current={len(block.value)}", f"- chars_limit={block.limit}", "</metadata>"]
    if line_numbered:
        lines += ["<warning>", LINE_NUMBER_WARNING, "</warning>", "<value>", *_numbered_lines(block.value)]
    else:
        lines += ["<value>", block.value]
    lines += ["</value>", f"</{block.label}>"]
    return "\n".join(lines) + "\n"


def _numbered_lines(value: str) -> list[str]:
    """``1→ first`` ...; a trailing newline yields a final empty numbered line so edits can target it."""
    if not value:
        return []
    return [f"{number}→ {line}" for number, line in enumerate(value.split("\n"), start=1)]


# --- git (MemFS projection) ---------------------------------------------------------------------


@dataclass
class _PathNode:
    """One path segment. A node may be both a file (blocks) and a directory (children)."""

    blocks: list[BlockView] = field(default_factory=list)
    # dicts keep insertion order, so siblings stay in attachment order.
    children: dict[str, _PathNode] = field(default_factory=dict)

    def insert(self, segments: Sequence[str], block: BlockView) -> None:
        node = self
        for segment in segments:
            node = node.children.setdefault(segment, _PathNode())
        node.blocks.append(block)


def _memfs_path(label: str) -> tuple[str, ...]:
    """The segments (without ``.md``) of the label's file in the agent's MemFS repository.

    A bare label such as ``persona`` or ``human`` lives in ``system/<label>.md`` (see
    ``memfs_layout.block_path``), so an agent switched into git mode keeps its classic core
    blocks in the prompt.
    """
    return tuple(block_path(label).removesuffix(".md").split("/"))


def _is_in_prompt(path: tuple[str, ...]) -> bool:
    return len(path) > 1 and path[0] == SYSTEM_DIR


def _render_git(blocks: Sequence[BlockView]) -> str:
    """MemFS-style view.

    Labels are paths. ``system/*`` labels (and bare labels, see ``_memfs_path``) are shown
    inline: the persona in ``<self>``, the rest nested by path under ``<memory>``. Other
    labels containing ``/`` are external: only their file names appear, as a tree in
    ``<external_projection>``. No char counts or read-only flags in this view. Sections
    are separated by blank lines and the output has no leading or trailing blank lines,
    matching the other views.
    """
    if not blocks:
        return ""
    persona_blocks: list[BlockView] = []
    in_prompt = _PathNode()
    external = _PathNode()
    for block in blocks:
        path = _memfs_path(block.label)
        if path == _PERSONA_PATH:
            persona_blocks.append(block)
        elif _is_in_prompt(path):
            in_prompt.insert(path[1:], block)
        else:
            external.insert(path, block)

    sections = [_GIT_REMINDER]
    if persona_blocks:
        sections.append(_render_self(persona_blocks))
    if in_prompt.children or external.children:
        sections.append(_render_memory(in_prompt, external))
    return "\n\n".join(sections)


def _render_self(persona_blocks: Sequence[BlockView]) -> str:
    lines = ["<self>"]
    for block in persona_blocks:
        lines += _file_body(block, _PERSONA_PATH, depth=0, with_description=False)
    lines.append("</self>")
    return "\n".join(lines)


def _render_memory(in_prompt: _PathNode, external: _PathNode) -> str:
    lines = ["<memory>"]
    for name, child in in_prompt.children.items():
        lines += _render_path_element(name, child, (SYSTEM_DIR, name), depth=0)
    if external.children:
        lines += ["<external_projection>", "${MEMORY_DIR}/", *_tree_lines(external, prefix="")]
        lines.append("</external_projection>")
    lines.append("</memory>")
    return "\n".join(lines)


def _render_path_element(name: str, node: _PathNode, path: tuple[str, ...], depth: int) -> list[str]:
    """One element per path segment; its own file content first, then nested children."""
    pad = _INDENT * depth
    lines = [f"{pad}<{name}>"]
    for block in node.blocks:
        lines += _file_body(block, path, depth=depth + 1, with_description=True)
    for child_name, child in node.children.items():
        lines += _render_path_element(child_name, child, (*path, child_name), depth + 1)
    lines.append(f"{pad}</{name}>")
    return lines


def _file_body(block: BlockView, path: tuple[str, ...], *, depth: int, with_description: bool) -> list[str]:
    lines = _indented(f"<projection>$MEMORY_DIR/{'/'.join(path)}.md</projection>", depth)
    if with_description and block.description:
        lines += _indented(f"<description>{block.description}</description>", depth)
    if block.value:
        lines += _indented(block.value, depth)
    return lines


def _indented(text: str, depth: int) -> list[str]:
    """Indent every line; blank lines stay empty rather than carrying trailing spaces."""
    pad = _INDENT * depth
    return [f"{pad}{line}" if line else "" for line in text.split("\n")]


def _tree_lines(node: _PathNode, prefix: str) -> list[str]:
    """Draw ``node``'s entries (``name.md`` files and ``name/`` dirs, sorted) with box-drawing connectors."""
    entries: list[tuple[str, _PathNode | None]] = []
    for name, child in node.children.items():
        if child.blocks:
            entries.append((f"{name}.md", None))
        if child.children:
            entries.append((f"{name}/", child))
    entries.sort(key=lambda entry: entry[0])

    lines: list[str] = []
    for index, (display_name, directory) in enumerate(entries):
        is_last = index == len(entries) - 1
        lines.append(f"{prefix}{'└── ' if is_last else '├── '}{display_name}")
        if directory is not None:
            lines += _tree_lines(directory, prefix + ("    " if is_last else "│   "))
    return lines
