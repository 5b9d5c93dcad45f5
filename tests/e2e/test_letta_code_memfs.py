"""Letta Code with MemFS (`--memfs`, LETTA_MEMFS_BASE_URL + LETTA_MEMFS_LOCAL=1) against a real
`memvm serve` whose model is the scripted fake: Letta Code clones the agent's memory from
`/v1/git/{agent_id}/state.git` with its API key as HTTP Basic, its own memory tool edits and commits a
file and its harness pushes after the turn, a REST edit reaches the checkout on the next run's
`git pull --ff-only`, and an over-limit edit is refused by memvm and reported by Letta Code.

The memory tool runs in Letta Code (a client tool, `memory_apply_patch` in the toolset it picks for
this model): memvm stops the turn with `requires_approval`, Letta Code runs the tool and sends its
result back, and the scripted model then answers with text.
"""

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.support import letta_code
from tests.support.letta_code import LettaCode, access_log, error_responses, memvm_serving, succeeded
from tests.support.scripted_llm import ScriptedLLM
from tests.support.serve import Served

ADMIN_KEY = "admin-key-for-letta-code-memfs"
MEMORY_TOOL = "memory_apply_patch"
FIRST_HUMAN_LINE = "I haven't gotten to know this person yet."  # Letta Code's new agent's human block
REST_VALUE = "Bob prefers green tea."
SMALL_LIMIT = 100
OVERFLOW = " Details:" + " tea" * 80  # takes the REST value far over SMALL_LIMIT


def human_patch(old: str, new: str) -> str:
    """A memory_apply_patch input that replaces one line of system/human.md."""
    return f"*** Begin Patch\n*** Update File: system/human.md\n@@\n-{old}\n+{new}\n*** End Patch"


# The memory edit the scripted model asks for when the newest user message holds the marker.
EDITS = {
    "marker-remember": human_patch(FIRST_HUMAN_LINE, "Bob likes tea."),
    "marker-overflow": human_patch(REST_VALUE, REST_VALUE + OVERFLOW),
}


def scripted(body: dict) -> dict[str, Any]:
    """A marker's memory edit as a client tool call; once its result came back (or for any other
    marker), text that names the marker and quotes the tool's result."""
    messages = body.get("messages") or []
    users = [index for index, message in enumerate(messages) if message.get("role") == "user"]
    newest = users[-1] if users else 0
    markers = re.findall(r"marker-[a-z]+", json.dumps(messages[newest].get("content"))) if users else []
    marker = markers[-1] if markers else "no-marker"
    results = [message["content"] for message in messages[newest:] if message.get("role") == "tool"]
    if marker in EDITS and not results:
        return {"tool_calls": [(MEMORY_TOOL, {"reason": f"remember ({marker})", "input": EDITS[marker]})]}
    return {"content": f"{marker} done. {' '.join(map(str, results))}".strip()}


class MemfsSession:
    """One Letta Code user with MemFS on, its memvm, and a REST client with the same key."""

    def __init__(self, letta: LettaCode, served: Served, rest: httpx.Client) -> None:
        self.letta, self.served, self.rest = letta, served, rest

    async def turn(self, marker: str, *args: str) -> tuple[dict, str]:
        """One headless turn with `--memfs`; (its JSON result, its stderr)."""
        run = await self.letta.run([*args, "--memfs", "--output-format", "json"], prompt=f"Hello, I am Bob. {marker}")
        result = succeeded(run, self.served, f"letta -p {marker} {' '.join(args)}")
        assert result["is_error"] is False, run.describe()
        assert result["result"].startswith(f"{marker} done."), run.describe()
        return result, run.stderr

    def human(self, agent_id: str) -> dict:
        response = self.rest.get(f"/v1/agents/{agent_id}/core-memory/blocks/human")
        assert response.status_code == 200, response.text
        return response.json()

    def git(self, agent_id: str, *args: str) -> str:
        """git in Letta Code's checkout, as its user."""
        done = subprocess.run(
            ["git", *args],
            cwd=self.letta.memory_dir(agent_id),
            env={"PATH": self.letta.env()["PATH"], "HOME": str(self.letta.home), "GIT_CONFIG_NOSYSTEM": "1"},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()

    def unpushed(self, agent_id: str) -> int:
        """Commits in the checkout that memvm does not have."""
        return int(self.git(agent_id, "rev-list", "--count", "origin/main..HEAD"))


def organization_key(base_url: str) -> str:
    created = httpx.post(
        f"{base_url}/v1/admin/api-keys", json={"organization": "bob"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    )
    assert created.status_code == 200, created.text
    return created.json()["key"]


async def test_letta_code_syncs_its_memfs_with_memvm(tmp_path: Path, database_url: str, llm: ScriptedLLM) -> None:
    letta_js = letta_code.bundle()
    llm.respond(scripted)
    # Keys required, so the git requests' Basic auth is checked.
    with memvm_serving(tmp_path / "serve.log", database_url, llm.base_url, MEMVM_ADMIN_API_KEY=ADMIN_KEY) as served:
        key = organization_key(served.base_url)
        memfs_env = {"LETTA_API_KEY": key, "LETTA_MEMFS_BASE_URL": served.base_url, "LETTA_MEMFS_LOCAL": "1"}
        letta = LettaCode(letta_js, served.base_url, tmp_path / "letta-code", extra_env=memfs_env)
        with httpx.Client(base_url=served.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=10.0) as rest:
            session = MemfsSession(letta, served, rest)
            agent = await new_agent_clones_its_memory(session)
            await memory_tool_edit_is_pushed(session, agent)
            await rest_edit_reaches_the_checkout(session, agent)
            await over_limit_edit_is_refused(session, agent)
        git_requests = [line for line in access_log(served) if f"/v1/git/{agent}/state.git/" in line]
        assert any("git-receive-pack HTTP" in line for line in git_requests), git_requests
        assert error_responses(served) == [], served.log()


async def new_agent_clones_its_memory(session: MemfsSession) -> str:
    result, _ = await session.turn("marker-hello", "--new-agent")
    agent = result["agent_id"]
    checkout = session.letta.memory_dir(agent)
    assert sorted(path.name for path in (checkout / "system").iterdir()) == ["MEMORY.md", "human.md", "persona.md"]
    human = (checkout / "system" / "human.md").read_text()
    assert human.startswith("---\ndescription: "), human
    assert human.endswith("---\n" + session.human(agent)["value"]), human
    assert session.git(agent, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert session.unpushed(agent) == 0
    return agent


async def memory_tool_edit_is_pushed(session: MemfsSession, agent: str) -> None:
    result, _ = await session.turn("marker-remember", "--agent", agent)
    assert f"{MEMORY_TOOL} committed" in result["result"], result  # the client tool ran and reported back
    value = session.human(agent)["value"]
    assert value.startswith("Bob likes tea.") and FIRST_HUMAN_LINE not in value, value
    assert session.git(agent, "log", "-1", "--format=%s") == "remember (marker-remember)"
    assert session.unpushed(agent) == 0


async def rest_edit_reaches_the_checkout(session: MemfsSession, agent: str) -> None:
    edited = session.rest.patch(f"/v1/agents/{agent}/core-memory/blocks/human", json={"value": REST_VALUE, "limit": SMALL_LIMIT})
    assert edited.status_code == 200, edited.text
    await session.turn("marker-hello", "--agent", agent)  # its startup pulls
    human = (session.letta.memory_dir(agent) / "system" / "human.md").read_text()
    assert human.endswith(f"limit: {SMALL_LIMIT}\n---\n{REST_VALUE}"), human


async def over_limit_edit_is_refused(session: MemfsSession, agent: str) -> None:
    before = session.human(agent)
    result, stderr = await session.turn("marker-overflow", "--agent", agent)
    assert f"{MEMORY_TOOL} committed" in result["result"], result  # committed locally; the push fails
    assert "MEMORY SYNC FAILED" in stderr, stderr
    assert re.search(rf"system/human\.md: [^\n]*limit of {SMALL_LIMIT}\b", stderr), stderr
    assert session.human(agent) == before
    assert session.unpushed(agent) == 1  # Letta Code keeps the refused commit and retries later
