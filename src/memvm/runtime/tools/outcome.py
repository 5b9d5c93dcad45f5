"""What running one tool call came to: shared by the executor, which makes it, and the turn
policy, which decides from it whether the turn goes on."""

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ToolOutcome:
    status: Literal["success", "error"]
    message: str
    terminal: bool = False
    heartbeat: bool = False  # the model asked to get control back (request_heartbeat=true)
    invalid_call: bool = False  # malformed arguments or unknown tool: the call itself was wrong
    stdout: str | None = None  # what a sandboxed call printed
    stderr: str | None = None

    @classmethod
    def invalid(cls, message: str) -> "ToolOutcome":
        return cls("error", message, invalid_call=True)


def clip(message: str, limit: int) -> str:
    if len(message) <= limit:
        return message
    return message[:limit] + f"\n… [truncated: the result exceeded {limit} characters]"
