"""A tool call's arguments: a JSON object, checked before anything runs so that a bad call gets a
message the model can act on."""

import json
from collections.abc import Iterable
from typing import Any

from memvm.llm.types import ToolCall


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(
            f"The arguments of {call.name} are not valid JSON ({error.msg} at position {error.pos}). "
            "Call the tool again with a JSON object."
        ) from None
    if not isinstance(arguments, dict):
        raise ValueError(f"The arguments of {call.name} must be a JSON object, not {type(arguments).__name__}.")
    return arguments


def check_names(name: str, arguments: dict[str, Any], accepted: Iterable[str], required: Iterable[str]) -> None:
    accepted = list(accepted)
    unknown = sorted(set(arguments) - set(accepted))
    missing = sorted(key for key in required if key not in arguments)
    if unknown or missing:
        parts = ([f"unknown argument(s) {', '.join(unknown)}"] if unknown else []) + (
            [f"missing required argument(s) {', '.join(missing)}"] if missing else []
        )
        raise ValueError(f"{name}: {'; '.join(parts)}. Expected arguments: {', '.join(accepted)}.")
