"""Import options and the import report (the SDK's AgentImportFileResponse, plus what memvm did)."""

from dataclasses import dataclass

from pydantic import BaseModel, Field

from memvm.errors import InvalidInput


@dataclass(frozen=True)
class ImportOptions:
    """What `POST /v1/agents/import` (and `memvm agents import`) may ask for."""

    name: str | None = None  # replaces every imported agent's name
    append_copy_suffix: bool = False  # "<name>_copy"
    model: str | None = None  # a model handle for every imported agent
    embedding: str | None = None  # an embedding handle for every imported agent
    strip_messages: bool = False
    secrets: dict[str, str] | None = None  # values for the tool variables the file names (blank there); others are added
    override_existing_tools: bool = False  # replace the source of same-named custom tools
    truncate_blocks: bool = False  # cut over-limit block values to their limit instead of refusing
    skip_unpaired_messages: bool = False  # drop unanswered tool calls and orphaned returns instead of refusing


class SkippedPart(BaseModel):
    part: str = Field(description="What was not imported, e.g. 'groups' or 'tool web_search'.")
    count: int = 1
    reason: str


class ImportResult(BaseModel):
    agent_ids: list[str] = Field(description="The imported agents, in file order.")
    skipped: list[SkippedPart] = Field(default_factory=list, description="Parts of the file memvm did not recreate.")
    repairs: list[str] = Field(default_factory=list, description="What truncate_blocks / skip_unpaired_messages changed.")
    notes: list[str] = Field(default_factory=list, description="Mappings worth knowing (models, reused tools).")


class InvalidAgentFile(InvalidInput):
    """The file cannot be imported as it is; `problems` lists every reason, and nothing was written."""

    def __init__(self, problems: list[str]) -> None:
        shown = "; ".join(f"({number}) {problem}" for number, problem in enumerate(problems[:50], start=1))
        more = f"; and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(
            f"The agent file has {len(problems)} problem(s), so nothing was imported: {shown}{more}. "
            "Fix the file, or pass truncate_blocks / skip_unpaired_messages to repair what they cover."
        )
        self.problems = problems
