"""The ``<memory_metadata>`` section appended after the memory blocks in the system prompt.

It tells the model how much out-of-context memory exists (counts and tag names only,
never message, passage or file text) and when the prompt was last compiled. Pure: the
timestamp is passed in, never read from the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class MemoryStats:
    recall_messages: int = 0  # messages stored but out of the context window
    archival_passages: int = 0
    archival_tags: tuple[str, ...] = ()
    files_open: int = 0  # files of the agent's folders open in its prompt
    files_total: int = 0  # files of the agent's folders it can open


def render_memory_metadata(
    *,
    agent_id: str,
    stats: MemoryStats,
    compiled_at: datetime,
    timezone: str,
    conversation_id: str = "default",
) -> str:
    """Render the metadata block; ``compiled_at`` must be tz-aware and is shown in ``timezone`` (an IANA name)."""
    lines = [
        "<memory_metadata>",
        f"- AGENT_ID: {agent_id}",
        f"- CONVERSATION_ID: {conversation_id}",
        f"- System prompt last recompiled: {format_timestamp(compiled_at, timezone)}",
        f"- {stats.recall_messages} previous messages between you and the user are stored in recall memory",
    ]
    if stats.archival_passages > 0:
        lines.append(
            f"- {stats.archival_passages} total memories you created are stored in archival memory (use tools to access them)"
        )
    tags = sorted(set(stats.archival_tags))
    if tags:
        lines.append(f"- Available archival memory tags: {', '.join(tags)}")
    if stats.files_total > 0:
        lines.append(
            f"- {stats.files_open} of {stats.files_total} files in your directories are open "
            "(use open_files, grep_files, semantic_search_files)"
        )
    lines.append("</memory_metadata>")
    return "\n".join(lines)


def format_timestamp(moment: datetime, timezone: str) -> str:
    """Same text as strftime("%Y-%m-%d %I:%M:%S %p %Z%z"), e.g. ``2025-01-15 09:00:00 AM PST-0800``."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        # A naive datetime would be read as the host's local time: hidden environment input.
        raise ValueError("compiled_at must be timezone-aware")
    local = moment.astimezone(ZoneInfo(timezone))
    # AM/PM spelled out here because %p follows the process locale.
    meridiem = "AM" if local.hour < 12 else "PM"
    return f"{local:%Y-%m-%d %I:%M:%S} {meridiem} {local:%Z%z}"
