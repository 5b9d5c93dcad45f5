"""The agent fields of Letta's agent file (its AgentSchema) that memvm stores, one row each: a
distinctive value to write into the real Letta 0.16.8 export, and what reading the agent back then
shows (as JSON, over HTTP or from the SDK's AgentState). For tests/agentfiles and tests/sdk."""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).parent.parent / "agentfiles" / "fixtures" / "letta-0.16.8-sample.af"
MASKED = "********"


@dataclass(frozen=True)
class Row:
    field: str  # of Letta's AgentSchema
    value: Any  # written into the export
    shown: Callable[[dict[str, Any]], Any]  # what the agent read back shows of it
    expected: Any


def _same(field: str, value: Any) -> Row:
    return Row(field, value, lambda agent: agent[field], value)


def variables(field: str) -> Callable[[dict[str, Any]], Any]:
    """An agent's tool variables as the API lists them: name → (masked) value."""
    return lambda agent: {item["key"]: item["value"] for item in agent[field]}


def _variables_row(field: str) -> Row:
    """Letta blanks the values of an agent's tool variables on export and keeps their names, in
    both fields; memvm lists the names and masks the values."""
    return Row(field, VARIABLES, variables(field), dict.fromkeys(VARIABLES, MASKED))


# Letta writes `model`, `embedding` and `context_window_limit` as null: its llm_config carries them.
LLM_CONFIG = {
    "model": "gpt-4o-mini", "model_endpoint_type": "openai", "model_endpoint": "https://api.openai.com/v1",
    "provider_name": "openai", "context_window": 20000, "handle": "openai/gpt-4o-mini", "temperature": 0.7,
}  # fmt: skip
VARIABLES = {"CRM_TOKEN": "", "REGION": ""}
LETTA_FIELDS = [
    _same("name", "eu-support"),
    _same("agent_type", "memgpt_v2_agent"),
    _same("system", "You answer support tickets from the EU.\n{CORE_MEMORY}"),
    _same("description", "Answers EU support tickets."),
    _same("tags", ["support", "eu"]),
    _same("metadata", {"team": "support", "tier": 2, "sandbox": {"network": False}}),
    _same("timezone", "Europe/Warsaw"),
    _same("message_buffer_autoclear", True),
    _same("tool_rules", [{"type": "max_count_per_step", "tool_name": "word_count", "max_count_limit": 3}]),
    Row(
        "llm_config",
        LLM_CONFIG,
        lambda agent: (agent["model"], agent["llm_config"]["context_window"]),
        ("openai/gpt-4o-mini", 20000),
    ),
    _variables_row("secrets"),
    _variables_row("tool_exec_environment_variables"),
    _same("max_files_open", 3),
    _same("per_file_view_window_char_limit", 4000),
]
EXPECTED = {row.field: row.expected for row in LETTA_FIELDS}


def letta_export(**agent_fields: Any) -> dict[str, Any]:
    """The real Letta export, its agent's fields replaced by `agent_fields`."""
    file = json.loads(SAMPLE.read_text())
    file["agents"][0].update(agent_fields)
    return file


def with_every_field() -> dict[str, Any]:
    return letta_export(**{row.field: row.value for row in LETTA_FIELDS})


def shown(agent: dict[str, Any]) -> dict[str, Any]:
    """What the agent read back shows of each row, to compare with EXPECTED."""
    return {row.field: row.shown(agent) for row in LETTA_FIELDS}
