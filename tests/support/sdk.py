"""Small helpers shared by the SDK conformance tests (tests/sdk)."""

import json
import re
import uuid

import httpx
from letta_client import AsyncLetta
from letta_client.types import AgentState

MODEL = "openai/scripted-model"
MISSING_AGENT = "agent-00000000-0000-4000-8000-000000000000"


def unique(prefix: str) -> str:
    """A name no other test on the module's shared server uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def new_agent(letta: AsyncLetta, **fields) -> AgentState:
    """An agent on the scripted model with `human` and `persona` blocks; `fields` add or override."""
    body = {
        "model": MODEL,
        "memory_blocks": [{"label": "human", "value": "Name: Bob"}, {"label": "persona", "value": "I am Sam."}],
    }
    body.update(fields)
    return await letta.agents.create(**body)


def request_lines(requests: list[httpx.Request]) -> list[str]:
    """'METHOD /path' for each recorded request."""
    return [f"{sent.method} {sent.url.path}" for sent in requests]


def memory_value(prompt: str, label: str) -> str:
    """The <value> of block `label` in a compiled (standard render mode) system prompt."""
    match = re.search(rf"<{re.escape(label)}>\n.*?<value>\n(.*?)\n</value>\n</{re.escape(label)}>", prompt, re.S)
    assert match, f"no block {label!r} in prompt:\n{prompt}"
    return match.group(1)


def prompt_text(raw: str) -> str:
    """`agents.recompile` is typed `-> str` with cast_to=str, and the SDK then returns the raw
    response body (`response.text`). Letta answers with a JSON string, as memvm does, so the SDK
    hands back the JSON-encoded text (quoted, `\\n` escaped); decode it to get the prompt."""
    assert raw.startswith('"'), f"recompile did not answer with a JSON string: {raw[:200]!r}"
    text = json.loads(raw)
    assert isinstance(text, str)
    return text
