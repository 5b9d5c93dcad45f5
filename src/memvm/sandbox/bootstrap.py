"""The program that runs inside the sandbox. It is passed to `python -I -c` as text, never imported
by the server, and uses only the standard library: the sandboxed interpreter sees nothing else.

It reads one JSON request from stdin: {"source", "function", "arguments", "env", "agent_state",
"result_fd"}, runs the tool's source, calls the function, and writes {"status", "value"} as JSON
to the result descriptor. stdout and stderr stay the tool's own and are captured by the server.
"""

from __future__ import annotations

import json
import os
import sys
from types import MappingProxyType

# Every import here is paid on every call (the interpreter starts with -S and nothing preloaded):
# typing, inspect and traceback cost more than the rest of the start together, so they stay out.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Block:
    """A read-only copy of one memory block, shaped like Letta's `Block` for what tools read."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.label = fields.get("label")
        self.value = fields.get("value", "")
        self.limit = fields.get("limit")
        self.description = fields.get("description")
        self.read_only = bool(fields.get("read_only", False))


class Memory:
    def __init__(self, blocks: list[dict[str, Any]]) -> None:
        self.blocks = [Block(fields) for fields in blocks]

    def get_block(self, label: str) -> Block:
        for block in self.blocks:
            if block.label == label:
                return block
        raise KeyError(f"Block '{label}' is not in this agent's memory (labels: {self.list_block_labels()}).")

    def list_block_labels(self) -> list[str]:
        return [str(block.label) for block in self.blocks]


class AgentState:
    """A snapshot taken when the call started: changing it changes nothing on the server."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.id = fields.get("id")
        self.name = fields.get("name")
        self.agent_type = fields.get("agent_type")
        self.tags = list(fields.get("tags", []))
        self.metadata = MappingProxyType(dict(fields.get("metadata") or {}))
        self.memory = Memory(fields.get("blocks", []))


def _serialise(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _call(request: dict[str, Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__tool__"}
    exec(compile(request["source"], "<tool>", "exec"), namespace)
    function = namespace.get(request["function"])
    if not callable(function):
        return {"status": "error", "value": f"The source defines no function named '{request['function']}'."}
    arguments = dict(request["arguments"])
    code = function.__code__
    if "agent_state" in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        arguments["agent_state"] = AgentState(request.get("agent_state") or {})
    return {"status": "success", "value": _serialise(function(**arguments))}


def main() -> None:
    request = json.loads(sys.stdin.read())
    os.environ.update(request.get("env") or {})
    try:
        result = _call(request)
    except BaseException as error:  # the tool's failure is a result, whatever it raised
        import traceback

        traceback.print_exc()
        result = {"status": "error", "value": f"{type(error).__name__}: {error}"}
    sys.stdout.flush()
    sys.stderr.flush()
    with os.fdopen(request["result_fd"], "w", encoding="utf-8") as channel:
        channel.write(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
