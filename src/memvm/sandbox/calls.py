"""What a sandboxed call is given and what it comes back with."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class ToolRun:
    source: str
    function: str
    arguments: Mapping[str, Any]
    env: Mapping[str, str] = field(default_factory=dict)  # the agent's tool variables, and nothing else
    agent_state: Mapping[str, Any] | None = None  # a read-only snapshot for tools that take `agent_state`
    network: bool = False
    requirements: tuple[str, ...] = ()  # pip specifiers ("name==1.2"); () runs on the bare runtime


@dataclass(frozen=True)
class ToolRunResult:
    status: Literal["success", "error"]
    value: str  # the return value (JSON or str), or what went wrong
    stdout: str = ""
    stderr: str = ""
