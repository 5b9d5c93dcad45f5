"""What a prompt is compiled from: an agent and its blocks as the compiler reads them (an ORM object
or a row of a recompile's direct statements, prompts/repository.py), and what a recompile stored."""

from datetime import datetime
from typing import Any, NamedTuple, Protocol


class PromptAgent(Protocol):
    """The agent's fields its prompt depends on."""

    @property
    def id(self) -> str: ...
    @property
    def system(self) -> str: ...
    @property
    def memory_render_mode(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def llm_config(self) -> dict[str, Any] | None: ...
    @property
    def context_window_limit(self) -> int | None: ...
    @property
    def max_files_open(self) -> int | None: ...
    @property
    def per_file_view_window_char_limit(self) -> int | None: ...


class PromptBlockFields(Protocol):
    """A block's fields its agents' prompts show."""

    @property
    def label(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def char_limit(self) -> int: ...
    @property
    def description(self) -> str | None: ...
    @property
    def read_only(self) -> bool: ...


class PromptInputs(NamedTuple):
    """An agent as a recompile reads it, locked: its PromptAgent fields, when its prompt was last
    compiled, and the counts of what it keeps outside its prompt."""

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
