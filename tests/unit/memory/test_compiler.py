"""Prompt compiler and memory metadata: golden files for each view plus targeted assertions.

Golden files are the contract and are compared byte-for-byte. To regenerate them on
purpose, run with MEMVM_REGEN_GOLDEN=1 and review the diff before keeping it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memvm.memory.compiler import (
    CORE_MEMORY_PLACEHOLDER,
    LINE_NUMBER_WARNING,
    BlockView,
    RenderMode,
    compile_system_prompt,
    render_blocks,
)
from memvm.memory.metadata import MemoryStats, render_memory_metadata

GOLDEN_DIR = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("MEMVM_REGEN_GOLDEN") == "1"

UNICODE_TEXT = "Zoë 🐙 日本語"
JAN_15_5PM_UTC = datetime(2025, 1, 15, 17, 0, tzinfo=UTC)

# Covers: read-only, None description, empty value, unicode, blank lines, trailing newline.
CLASSIC_BLOCKS = (
    BlockView(label="persona", value="I am Sam.\nI like tea.", limit=5000, description="The persona block: who I am."),
    BlockView(
        label="human",
        value=f"Name: {UNICODE_TEXT}\n\nLikes: ramen\n",
        limit=2000,
        description=None,
        read_only=True,
    ),
    BlockView(label="scratchpad", value="", limit=100, description="Empty on purpose"),
)

GIT_BLOCKS = (
    BlockView(label="persona", value="I am Sam.\n\nI like tea.", limit=5000, description="ignored in <self>"),
    BlockView(label="human", value=f"Name: {UNICODE_TEXT}\nLikes: ramen\n", limit=2000, read_only=True),
    BlockView(label="notes/archive", value="old stuff, never inline", limit=100),
    BlockView(label="system/project/notes", value="Line one\n\nLine three", limit=100, description="Project notes"),
    BlockView(label="system/style", value=f"Be brief. {UNICODE_TEXT}", limit=100, description=""),
    BlockView(label="system/project/todo", value="", limit=100, description=None),
    BlockView(label="reference/api/v1", value="external", limit=100),
    BlockView(label="notes/2024/jan", value="external", limit=100),
    BlockView(label="zeta", value="bare label goes to system/", limit=100),
)


def assert_matches_golden(name: str, rendered: str) -> None:
    path = GOLDEN_DIR / f"{name}.txt"
    actual = rendered.encode("utf-8")
    if REGENERATE:
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_bytes(actual)
    assert path.read_bytes() == actual, f"{path.name} differs; rerun with MEMVM_REGEN_GOLDEN=1 and review"


def metadata_text(stats: MemoryStats = MemoryStats(), tz: str = "UTC") -> str:
    return render_memory_metadata(
        agent_id="agent-00000000-0000-4000-8000-000000000000",
        stats=stats,
        compiled_at=JAN_15_5PM_UTC,
        timezone=tz,
    )


# --- golden files ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("golden", "blocks", "mode"),
    [
        ("standard", CLASSIC_BLOCKS, RenderMode.STANDARD),
        ("standard_empty", (), RenderMode.STANDARD),
        ("line_numbered", CLASSIC_BLOCKS, RenderMode.LINE_NUMBERED),
        ("line_numbered_empty", (), RenderMode.LINE_NUMBERED),
        ("git", GIT_BLOCKS, RenderMode.GIT),
        ("git_classic_blocks", CLASSIC_BLOCKS, RenderMode.GIT),
        ("git_empty", (), RenderMode.GIT),
    ],
)
def test_render_blocks_matches_golden(golden, blocks, mode):
    assert_matches_golden(golden, render_blocks(blocks, mode))


def test_compiled_prompt_matches_golden():
    stats = MemoryStats(recall_messages=42, archival_passages=156, archival_tags=("work", "home", "work"))
    prompt = compile_system_prompt(
        system="<base_instructions>\nYou are a helpful agent.\n</base_instructions>",
        blocks=CLASSIC_BLOCKS,
        mode=RenderMode.STANDARD,
        metadata=metadata_text(stats, tz="America/Los_Angeles"),
    )
    assert_matches_golden("compiled_prompt", prompt)


# --- standard / line-numbered details -------------------------------------------------------------


def test_chars_current_counts_characters_not_bytes():
    block = BlockView(label="human", value=UNICODE_TEXT, limit=50)
    assert len(UNICODE_TEXT) == 9 and len(UNICODE_TEXT.encode("utf-8")) == 19
    for mode in (RenderMode.STANDARD, RenderMode.LINE_NUMBERED):
        rendered = render_blocks([block], mode)
        assert "- chars_current=9\n- chars_limit=50\n" in rendered


def test_read_only_line_only_for_read_only_blocks():
    writable = BlockView(label="a", value="x", limit=10)
    locked = BlockView(label="b", value="x", limit=10, read_only=True)
    for mode in (RenderMode.STANDARD, RenderMode.LINE_NUMBERED):
        rendered = render_blocks([writable, locked], mode)
        assert rendered.count("- read_only=true") == 1
        assert "<b>\n<description>\n\n</description>\n<metadata>\n- read_only=true\n- chars_current=1" in rendered
        assert "<a>\n<description>\n\n</description>\n<metadata>\n- chars_current=1" in rendered


def test_standard_value_is_verbatim_and_blocks_separated_by_blank_line():
    blocks = [BlockView(label="a", value="x\n\ny\n", limit=9), BlockView(label="b", value="", limit=9)]
    rendered = render_blocks(blocks, RenderMode.STANDARD)
    assert "<value>\nx\n\ny\n\n</value>\n</a>\n\n<b>\n" in rendered
    assert rendered.endswith("<value>\n\n</value>\n</b>\n\n</memory_blocks>")


def test_line_numbers_are_one_based_with_arrow():
    block = BlockView(label="persona", value="first\n\nthird", limit=100)
    rendered = render_blocks([block], RenderMode.LINE_NUMBERED)
    expected_value = "<value>\n1\u2192 first\n2\u2192 \n3\u2192 third\n</value>"
    assert expected_value in rendered
    assert f"</metadata>\n<warning>\n{LINE_NUMBER_WARNING}\n</warning>\n<value>" in rendered
    assert "0\u2192" not in rendered


def test_line_numbered_empty_value_has_no_lines():
    rendered = render_blocks([BlockView(label="empty", value="", limit=5)], RenderMode.LINE_NUMBERED)
    assert "<value>\n</value>" in rendered
    assert "\u2192 " not in rendered.replace(LINE_NUMBER_WARNING, "")


def test_empty_block_list_per_mode():
    assert render_blocks([], RenderMode.STANDARD) == ""
    assert render_blocks([], RenderMode.GIT) == ""
    wrapper = render_blocks([], RenderMode.LINE_NUMBERED)
    assert wrapper.startswith("<memory_blocks>\nThe following memory blocks")
    assert wrapper.endswith("</memory_blocks>")


def test_mode_accepts_plain_string():
    blocks = [BlockView(label="a", value="x", limit=1)]
    assert render_blocks(blocks, "line_numbered") == render_blocks(blocks, RenderMode.LINE_NUMBERED)


# --- git view ------------------------------------------------------------------------------------

SMALL_GIT_EXAMPLE = (
    BlockView(label="persona", value="I am Sam.", limit=100),
    BlockView(label="human", value="Name: Bob", limit=100, description="Human info"),
    BlockView(label="system/project/notes", value="Ship v1.\nThen rest.", limit=100),
    BlockView(label="notes/archive", value="secret archive text", limit=100),
)

SMALL_GIT_EXPECTED = """\
Reminder: <projection> contains the local path of the memory file projection.

<self>
<projection>$MEMORY_DIR/system/persona.md</projection>
I am Sam.
</self>

<memory>
<human>
  <projection>$MEMORY_DIR/system/human.md</projection>
  <description>Human info</description>
  Name: Bob
</human>
<project>
  <notes>
    <projection>$MEMORY_DIR/system/project/notes.md</projection>
    Ship v1.
    Then rest.
  </notes>
</project>
<external_projection>
${MEMORY_DIR}/
\u2514\u2500\u2500 notes/
    \u2514\u2500\u2500 archive.md
</external_projection>
</memory>"""


def test_git_small_example_exact():
    assert render_blocks(SMALL_GIT_EXAMPLE, RenderMode.GIT) == SMALL_GIT_EXPECTED


def test_git_external_values_never_inline():
    rendered = render_blocks(SMALL_GIT_EXAMPLE, RenderMode.GIT)
    assert "secret archive text" not in rendered
    assert "chars_current" not in rendered and "chars_limit" not in rendered


def test_git_bare_and_prefixed_labels_project_to_same_place():
    bare = render_blocks([BlockView(label="human", value="x", limit=1)], RenderMode.GIT)
    prefixed = render_blocks([BlockView(label="system/human", value="x", limit=1)], RenderMode.GIT)
    assert bare == prefixed
    assert "<projection>$MEMORY_DIR/system/human.md</projection>" in bare


def test_git_siblings_keep_attachment_order_and_merge_shared_prefix():
    blocks = [
        BlockView(label="system/b/one", value="1", limit=1),
        BlockView(label="system/a", value="2", limit=1),
        BlockView(label="system/b/two", value="3", limit=1),
    ]
    rendered = render_blocks(blocks, RenderMode.GIT)
    assert rendered.count("<b>") == 1
    assert rendered.index("<b>") < rendered.index("<a>")
    assert rendered.index("<one>") < rendered.index("<two>") < rendered.index("</b>")


def test_git_external_tree_sorted_with_connectors():
    blocks = [
        BlockView(label="zz/last", value="", limit=1),
        BlockView(label="docs/b", value="", limit=1),
        BlockView(label="docs/a/deep", value="", limit=1),
    ]
    rendered = render_blocks(blocks, RenderMode.GIT)
    expected_tree = (
        "<external_projection>\n${MEMORY_DIR}/\n"
        "\u251c\u2500\u2500 docs/\n"
        "\u2502   \u251c\u2500\u2500 a/\n"
        "\u2502   \u2502   \u2514\u2500\u2500 deep.md\n"
        "\u2502   \u2514\u2500\u2500 b.md\n"
        "\u2514\u2500\u2500 zz/\n"
        "    \u2514\u2500\u2500 last.md\n"
        "</external_projection>"
    )
    assert expected_tree in rendered
    assert "<self>" not in rendered


def test_git_without_persona_or_external_omits_those_sections():
    rendered = render_blocks([BlockView(label="human", value="x", limit=1)], RenderMode.GIT)
    assert "<self>" not in rendered and "<external_projection>" not in rendered
    persona_only = render_blocks([BlockView(label="system/persona", value="me", limit=1)], RenderMode.GIT)
    assert "<memory>" not in persona_only and persona_only.endswith("me\n</self>")


# --- system prompt assembly -----------------------------------------------------------------------


def test_placeholder_replaced_everywhere():
    blocks = [BlockView(label="a", value="x", limit=1)]
    memory = render_blocks(blocks, RenderMode.STANDARD) + "\n\nMETA"
    system = f"before {CORE_MEMORY_PLACEHOLDER} middle {CORE_MEMORY_PLACEHOLDER} after"
    prompt = compile_system_prompt(system=system, blocks=blocks, mode=RenderMode.STANDARD, metadata="META")
    assert prompt == f"before {memory} middle {memory} after"


def test_memory_appended_without_placeholder():
    blocks = [BlockView(label="a", value="x", limit=1)]
    prompt = compile_system_prompt(system="BASE", blocks=blocks, mode=RenderMode.STANDARD, metadata="META")
    assert prompt == "BASE\n\n" + render_blocks(blocks, RenderMode.STANDARD) + "\n\nMETA"


def test_no_blocks_leaves_only_metadata():
    prompt = compile_system_prompt(system="BASE", blocks=[], mode=RenderMode.STANDARD, metadata="META")
    assert prompt == "BASE\n\nMETA"
    with_placeholder = compile_system_prompt(
        system=f"[{CORE_MEMORY_PLACEHOLDER}]", blocks=[], mode=RenderMode.GIT, metadata="META"
    )
    assert with_placeholder == "[META]"


# --- metadata ------------------------------------------------------------------------------------


def test_metadata_exact_text_in_utc():
    assert metadata_text(MemoryStats(recall_messages=42)) == (
        "<memory_metadata>\n"
        "- AGENT_ID: agent-00000000-0000-4000-8000-000000000000\n"
        "- CONVERSATION_ID: default\n"
        "- System prompt last recompiled: 2025-01-15 05:00:00 PM UTC+0000\n"
        "- 42 previous messages between you and the user are stored in recall memory\n"
        "</memory_metadata>"
    )


def test_metadata_converts_to_agent_timezone():
    text = metadata_text(tz="America/Los_Angeles")
    assert "- System prompt last recompiled: 2025-01-15 09:00:00 AM PST-0800\n" in text


def test_metadata_accepts_any_aware_datetime():
    plus_two = JAN_15_5PM_UTC.astimezone(timezone(timedelta(hours=2)))
    text = render_memory_metadata(agent_id="agent-x", stats=MemoryStats(), compiled_at=plus_two, timezone="UTC")
    assert "2025-01-15 05:00:00 PM UTC+0000" in text


def test_metadata_rejects_naive_datetime():
    with pytest.raises(ValueError):
        render_memory_metadata(agent_id="agent-x", stats=MemoryStats(), compiled_at=datetime(2025, 1, 15), timezone="UTC")


def test_archival_line_absent_at_zero_present_above():
    assert "archival memory (use tools" not in metadata_text(MemoryStats(archival_passages=0))
    line = "- 156 total memories you created are stored in archival memory (use tools to access them)\n"
    assert line in metadata_text(MemoryStats(archival_passages=156))


def test_tags_sorted_and_deduplicated():
    text = metadata_text(MemoryStats(archival_tags=("work", "alpha", "work", "Beta")))
    assert "- Available archival memory tags: Beta, alpha, work\n" in text
    assert "Available archival memory tags" not in metadata_text(MemoryStats(archival_tags=()))


def test_metadata_shows_counts_and_conversation_id():
    text = render_memory_metadata(
        agent_id="agent-1",
        stats=MemoryStats(recall_messages=0, archival_passages=3),
        compiled_at=JAN_15_5PM_UTC,
        timezone="UTC",
        conversation_id="conv-9",
    )
    assert text.splitlines() == [
        "<memory_metadata>",
        "- AGENT_ID: agent-1",
        "- CONVERSATION_ID: conv-9",
        "- System prompt last recompiled: 2025-01-15 05:00:00 PM UTC+0000",
        "- 0 previous messages between you and the user are stored in recall memory",
        "- 3 total memories you created are stored in archival memory (use tools to access them)",
        "</memory_metadata>",
    ]
