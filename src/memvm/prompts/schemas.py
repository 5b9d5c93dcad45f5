"""What a recompile reads of an agent and its blocks (rows of its direct statements,
prompts/repository.py; the compiler takes these or the ORM objects), and what it stored."""

from datetime import datetime
from typing import Any, NamedTuple


class PromptInputs(NamedTuple):
    """An agent as a recompile reads it, locked: the fields its prompt depends on, when its prompt was
    last compiled, and the counts of what it keeps outside its prompt."""

    id: str
    system: str
    memory_render_mode: str
    timezone: str
    llm_config: dict[str, Any] | None
    context_window_limit: int | None
    max_files_open: int | None
    per_file_view_window_char_limit: int | None
    system_compiled_at: datetime
    recall: int
    passages: int
    folders: int
    tags: tuple[str, ...]


PROMPT_AGENT_COLUMNS = PromptInputs._fields[:9]  # the agent table's columns among them


class PromptBlock(NamedTuple):
    label: str
    value: str
    char_limit: int
    description: str | None
    read_only: bool


class StoredPrompt(NamedTuple):
    """A prompt a recompile stored."""

    agent_id: str
    prompt: str
    compiled_at: datetime
    updated_at: datetime  # the agent's, as the store set it
