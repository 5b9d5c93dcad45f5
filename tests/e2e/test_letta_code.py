"""Letta Code itself (npm `@letta-ai/letta-code`, pinned in tests/support/letta_code.py), headless,
against a real `memvm serve` on loopback whose model is the scripted fake: what a user of Letta Code
does first, and memvm answering none of its requests with a 4xx or 5xx.

The package is fetched once per machine (`~/.cache/memvm-tests/`); the test skips only without
`node`/`npm` or without the npm registry.
"""

import json
from pathlib import Path
from typing import Any

from tests.support import letta_code
from tests.support.letta_code import LettaCode, access_log, error_responses, memvm_serving, succeeded
from tests.support.scripted_llm import ScriptedLLM
from tests.support.serve import Served

# Each prompt carries one marker; the scripted model answers the marker of the newest user message.
ANSWERS = {
    "marker-alpha": "Alpha answer: hello Bob.",
    "marker-bravo": "Bravo answer: same thread.",
    "marker-charlie": "Charlie answer: default thread.",
    "marker-delta": "Delta answer: a new thread.",
}
UNSCRIPTED = "Unscripted answer: no marker in the newest user message."


def answer_by_marker(body: dict) -> dict[str, Any]:
    """Plain text (no tool call, so the turn ends) chosen by the marker in the newest user message."""
    users = [message for message in body.get("messages") or [] if message.get("role") == "user"]
    newest = json.dumps(users[-1].get("content")) if users else ""
    return {"content": next((answer for marker, answer in ANSWERS.items() if marker in newest), UNSCRIPTED)}


async def prompt(letta: LettaCode, served: Served, marker: str, *args: str) -> dict:
    """One headless turn; checks it ended in the scripted answer to `marker`."""
    run = await letta.run([*args, "--output-format", "json"], prompt=f"Hello, I am Bob. {marker}")
    result = succeeded(run, served, f"letta -p … {' '.join(args)}")
    assert result["is_error"] is False, run.describe()
    assert result["result"] == ANSWERS[marker], run.describe()
    assert result["agent_id"].startswith("agent-"), run.describe()
    return result


def markers_in(messages: list[dict]) -> list[str]:
    """The markers the listed or found messages hold (user prompts and scripted answers), in order."""
    found = []
    for message in messages:
        text = json.dumps(message.get("content"))
        found += [marker for marker, answer in ANSWERS.items() if marker in text or answer in text]
    return found


async def test_letta_code_runs_headless_against_memvm(tmp_path: Path, database_url: str, llm: ScriptedLLM) -> None:
    letta_js = letta_code.bundle()
    llm.respond(answer_by_marker)
    with memvm_serving(tmp_path / "serve.log", database_url, llm.base_url) as served:
        letta = LettaCode(letta_js, served.base_url, tmp_path / "letta-code")

        first = await prompt(letta, served, "marker-alpha", "--new-agent")
        agent, thread = first["agent_id"], first["conversation_id"]
        assert thread.startswith("conv-"), first
        # A conversation's id names its agent: Letta Code refuses `--agent` beside one (not beside "default").
        second = await prompt(letta, served, "marker-bravo", "--conversation", thread)
        assert (second["agent_id"], second["conversation_id"]) == (agent, thread), second
        default = await prompt(letta, served, "marker-charlie", "--agent", agent, "--conversation", "default")
        assert (default["agent_id"], default["conversation_id"]) == (agent, "default"), default
        fresh = await prompt(letta, served, "marker-delta", "--agent", agent, "--new")
        assert fresh["agent_id"] == agent, fresh
        assert fresh["conversation_id"].startswith("conv-") and fresh["conversation_id"] != thread, fresh

        # Histories: each conversation holds its own turns (prompt and answer), oldest first.
        listed = await letta.run(["messages", "list", "--agent", agent, "--conversation", thread, "--order", "asc"])
        history = succeeded(listed, served, "messages list (the first conversation)")
        assert markers_in(history) == ["marker-alpha"] * 2 + ["marker-bravo"] * 2, listed.describe()
        listed = await letta.run(["messages", "list", "--agent", agent, "--order", "asc"])
        history = succeeded(listed, served, "messages list (the default conversation)")
        assert markers_in(history) == ["marker-charlie"] * 2, listed.describe()

        # Search: the agent's every conversation, or one conversation alone.
        found = await letta.run(["messages", "search", "--query", "marker-bravo", "--agent", agent])
        assert "marker-bravo" in markers_in(succeeded(found, served, "messages search --agent")), found.describe()
        found = await letta.run(["messages", "search", "--query", "Bob", "--conversation", thread])
        hits = markers_in(succeeded(found, served, "messages search --conversation"))
        assert set(hits) == {"marker-alpha", "marker-bravo"}, found.describe()  # every prompt names Bob

        assert any("/v1/conversations/" in line for line in access_log(served)), f"no access log:\n{served.log()}"
        assert error_responses(served) == [], served.log()
