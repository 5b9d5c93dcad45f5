"""Token estimates without a tokenizer: about four characters per token for English text, plus a
small per-message overhead. Used only when the provider reports no usage, and for /context."""

import json
import math

from memvm.llm.types import ChatMessage, ToolSpec

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4


def estimate_text(text: str | None) -> int:
    return math.ceil(len(text or "") / CHARS_PER_TOKEN)


def estimate_message(message: ChatMessage) -> int:
    calls = sum(estimate_text(call.name) + estimate_text(call.arguments) for call in message.tool_calls)
    return MESSAGE_OVERHEAD + estimate_text(message.content) + calls


def estimate_tools(tools: list[ToolSpec]) -> int:
    return sum(
        estimate_text(json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters})) for t in tools
    )
