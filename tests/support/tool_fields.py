"""The tool fields of Letta's agent file (its ToolSchema) that memvm stores, one row each: a
distinctive value to write into the custom tool of the real Letta 0.16.8 export, and what
GET /v1/tools/{id} then shows. For tests/agentfiles."""

from dataclasses import dataclass
from typing import Any

from tests.support.agent_fields import letta_export

TOOL_NAME = "word_count"  # the custom tool of the sample export
SOURCE = '''
def word_count(text: str) -> int:
    """Count the words in a text, split on whitespace.

    Args:
        text: The text whose words to count.
    """
    return len(text.split())
'''
JSON_SCHEMA = {
    "name": TOOL_NAME,
    "description": "Count the words in a text, split on whitespace.",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text whose words to count."}},
        "required": ["text"],
    },
}
NETWORK = {"sandbox": {"network": True}}


@dataclass(frozen=True)
class Row:
    field: str  # of Letta's ToolSchema, as its export spells it
    value: Any  # written into the export
    shown_as: str  # the field of memvm's tool that shows it


LETTA_FIELDS = [
    Row("source_code", SOURCE, "source_code"),
    Row("json_schema", JSON_SCHEMA, "json_schema"),
    Row("description", "Counts words for the field table.", "description"),
    Row("tags", ["text", "counting"], "tags"),
    Row("args_json_schema", {"type": "object", "properties": {"text": {"type": "string"}}}, "args_json_schema"),
    Row("return_char_limit", 1234, "return_char_limit"),
    Row("pip_requirements", [{"name": "six", "version": "1.16.0"}], "pip_requirements"),
    Row("default_requires_approval", True, "default_requires_approval"),
    Row("enable_parallel_execution", True, "enable_parallel_execution"),
    Row("metadata_", {"tool_hash": "18c4ac3e39cb", **NETWORK}, "metadata"),
]
EXPECTED = {row.shown_as: row.value for row in LETTA_FIELDS}
# Fields of Letta's ToolSchema that memvm does not keep: its tools are Python (no npm packages) and
# their source type is always "python".
NOT_KEPT = {"npm_requirements": [{"name": "left-pad", "version": "1.3.0"}], "source_type": "json"}


def with_tool_fields(**fields: Any) -> dict[str, Any]:
    """The real Letta export, its custom tool's fields replaced by `fields`."""
    file = letta_export()
    [tool] = [tool for tool in file["tools"] if tool["name"] == TOOL_NAME]
    tool.update(fields)
    return file


def with_every_field() -> dict[str, Any]:
    return with_tool_fields(**{row.field: row.value for row in LETTA_FIELDS}, **NOT_KEPT)


def shown(tool: dict[str, Any]) -> dict[str, Any]:
    """What the tool read back shows of each row, to compare with EXPECTED."""
    return {row.shown_as: tool[row.shown_as] for row in LETTA_FIELDS}
