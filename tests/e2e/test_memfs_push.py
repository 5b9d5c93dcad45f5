"""MemFS push semantics with Debian's git CLI against a live `memvm serve` with keys required: what a
push does to blocks, their history and the prompt, what it refuses (changing nothing), and how
files that are no blocks travel. Clone, refusals of the protocol and authentication:
tests/e2e/test_memfs_git.py."""

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.memfs_git import Git, KeyedServer, basic, commit_file, keyed_server
from tests.support.scripted_llm import ScriptedLLM


@dataclass
class Remote:
    """One organization's view of a live server: its agents over REST, their repositories over git."""

    server: KeyedServer
    git: Git
    api: httpx.Client

    @property
    def header(self) -> str:
        return basic(self.server.key)

    def new_agent(self, blocks: list[dict[str, Any]], **fields: Any) -> str:
        created = self.api.post("/v1/agents/", json={"name": "pusher", "memory_blocks": blocks, **fields})
        assert created.status_code == 200, created.text
        return str(created.json()["id"])

    def block(self, agent_id: str, label: str) -> dict[str, Any]:
        answer = self.api.get(f"/v1/agents/{agent_id}/core-memory/blocks/{label}")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def labels(self, agent_id: str) -> set[str]:
        return {block["label"] for block in self.api.get(f"/v1/agents/{agent_id}/core-memory/blocks").json()}

    def edit(self, block_id: str, value: str) -> None:
        edited = self.api.patch(f"/v1/blocks/{block_id}", json={"value": value})
        assert edited.status_code == 200, edited.text

    def history(self, block_id: str) -> list[dict[str, Any]]:
        """Newest first."""
        answer = self.api.get(f"/v1/blocks/{block_id}/history", params={"limit": 100})
        assert answer.status_code == 200, answer.text
        return list(answer.json())

    def prompt(self, agent_id: str) -> str:
        """The system prompt as stored, what the next turn sends (a recompile would make it afresh)."""
        answer = self.api.get(f"/v1/agents/{agent_id}/context")
        assert answer.status_code == 200, answer.text
        return str(answer.json()["system_prompt"])

    def clone(self, agent_id: str, name: str) -> Path:
        self.git.ok("clone", "-q", self.git.url(agent_id), name, header=self.header)
        return self.git.home / name

    def push(self, checkout: Path) -> subprocess.CompletedProcess[str]:
        return self.git("push", "origin", "main", cwd=checkout, header=self.header)

    def remote_head(self, agent_id: str) -> str:
        return self.git.ok("ls-remote", self.git.url(agent_id), "refs/heads/main", header=self.header).split()[0]


@pytest.fixture
def remote(database_url: str, tmp_path: Path, llm: ScriptedLLM) -> Iterator[Remote]:
    settings = {"MEMVM_OPENAI_BASE_URL": llm.base_url, "MEMVM_OPENAI_API_KEY": "k"}
    with keyed_server(database_url, tmp_path / "serve.log", **settings) as server:
        headers = {"Authorization": f"Bearer {server.key}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30.0) as api:
            yield Remote(server, Git(tmp_path, server.base_url), api)


def edit_file(remote: Remote, checkout: Path, path: str, old: str, new: str) -> None:
    text = (checkout / path).read_text()
    assert old in text, text
    commit_file(remote.git, checkout, path, text.replace(old, new))


def head(remote: Remote, checkout: Path) -> str:
    return remote.git.ok("rev-parse", "HEAD", cwd=checkout).strip()


def test_a_pushed_edit_is_the_blocks_next_version_by_the_pusher_in_the_prompt_and_keeps_its_commit_id(
    remote: Remote,
) -> None:
    agent_id = remote.new_agent([{"label": "human", "value": "Name: Bob", "limit": 200, "description": "who I talk to"}])
    before = remote.block(agent_id, "human")
    repo = remote.clone(agent_id, "repo")
    edit_file(remote, repo, "system/human.md", "Name: Bob", "Name: Bob Smith, a pilot")

    pushed = remote.push(repo)
    second = remote.clone(agent_id, "second")

    assert pushed.returncode == 0, pushed.stderr
    after = remote.block(agent_id, "human")
    assert after["value"] == "Name: Bob Smith, a pilot" and after["version"] == before["version"] + 1
    newest = remote.history(after["id"])[0]
    assert newest["version"] == after["version"]
    assert newest["actor"]["type"] == "api_key" and newest["actor"]["id"] == remote.server.key_id, newest["actor"]
    assert "Name: Bob Smith, a pilot" in remote.prompt(agent_id)
    assert head(remote, second) == head(remote, repo) == remote.remote_head(agent_id)


def test_an_over_limit_push_names_the_file_and_the_limit_and_changes_nothing(remote: Remote) -> None:
    agent_id = remote.new_agent(
        [{"label": "human", "value": "Name: Bob", "limit": 20}, {"label": "persona", "value": "I am Sam."}]
    )
    repo = remote.clone(agent_id, "repo")
    before = {label: remote.block(agent_id, label) for label in ("human", "persona")}
    remote_before = remote.remote_head(agent_id)
    # A first commit that alone would be taken, then the one over the limit: the push is one.
    edit_file(remote, repo, "system/persona.md", "I am Sam.", "I am Sam, a pilot.")
    edit_file(remote, repo, "system/human.md", "Name: Bob", "Name: Bob, who talks a lot")

    refused = remote.push(repo)

    assert refused.returncode != 0
    rule = "system/human.md: Value of block 'human' is 26 characters, over its limit of 20."
    assert f"[remote rejected] main -> main ({rule}" in refused.stderr, refused.stderr
    assert "remote: nothing was applied" in refused.stderr
    assert {label: remote.block(agent_id, label) for label in ("human", "persona")} == before
    assert remote.remote_head(agent_id) == remote_before


def test_a_push_that_edits_a_read_only_block_is_refused_and_changes_nothing(remote: Remote) -> None:
    agent_id = remote.new_agent([{"label": "policy", "value": "Be kind.", "read_only": True}])
    repo = remote.clone(agent_id, "repo")
    before, remote_before = remote.block(agent_id, "policy"), remote.remote_head(agent_id)
    assert "read_only: true" in (repo / "system/policy.md").read_text()
    edit_file(remote, repo, "system/policy.md", "Be kind.", "Anything goes.")

    refused = remote.push(repo)

    assert refused.returncode != 0
    assert "[remote rejected] main -> main (system/policy.md: the block is read-only" in refused.stderr, refused.stderr
    assert remote.block(agent_id, "policy") == before
    assert remote.remote_head(agent_id) == remote_before


def test_a_push_behind_a_rest_edit_is_refused_until_pulled_with_rebase(remote: Remote) -> None:
    agent_id = remote.new_agent([{"label": "human", "value": "Name: Bob"}, {"label": "persona", "value": "I am Sam."}])
    repo = remote.clone(agent_id, "repo")
    human = remote.block(agent_id, "human")
    remote.edit(human["id"], "Name: Bob, from the API")
    persona = remote.block(agent_id, "persona")
    edit_file(remote, repo, "system/persona.md", "I am Sam.", "I am Sam, from git.")

    stale = remote.push(repo)
    unchanged = remote.block(agent_id, "persona")
    remote.git.ok("pull", "-q", "--rebase", cwd=repo, header=remote.header)
    rebased = remote.push(repo)

    assert stale.returncode != 0 and "! [rejected]" in stale.stderr and "main -> main (fetch first)" in stale.stderr, stale.stderr
    assert unchanged == persona
    assert rebased.returncode == 0, rebased.stderr
    assert remote.block(agent_id, "persona")["value"] == "I am Sam, from git."
    assert remote.block(agent_id, "human")["value"] == "Name: Bob, from the API"
    assert (repo / "system/human.md").read_text().endswith("Name: Bob, from the API")


def test_a_rest_edit_between_gits_ref_advertisement_and_its_pack_refuses_the_push(remote: Remote) -> None:
    """git's pre-push hook runs after git read the refs and before it sends the pack: the race
    that git's own check cannot see, so memvm's must."""
    agent_id = remote.new_agent([{"label": "human", "value": "Name: Bob"}, {"label": "persona", "value": "I am Sam."}])
    repo = remote.clone(agent_id, "repo")
    human, persona = remote.block(agent_id, "human"), remote.block(agent_id, "persona")
    edit_file(remote, repo, "system/persona.md", "I am Sam.", "I am Sam, from git.")
    hook = repo / ".git/hooks/pre-push"
    hook.parent.mkdir(exist_ok=True)  # git makes it only from its templates
    hook.write_text(
        f"#!{sys.executable}\nimport httpx\n"
        f"httpx.patch({remote.server.base_url + '/v1/blocks/' + human['id']!r}, json={{'value': 'Name: Bob, raced'}},"
        f" headers={{'Authorization': 'Bearer {remote.server.key}'}}).raise_for_status()\n"
    )
    hook.chmod(0o755)

    raced = remote.push(repo)

    assert raced.returncode != 0
    assert "[remote rejected] main -> main (non-fast-forward: main has moved on the server" in raced.stderr, raced.stderr
    assert remote.block(agent_id, "human")["value"] == "Name: Bob, raced"  # the hook's edit, alone
    assert remote.block(agent_id, "persona") == persona
    assert remote.remote_head(agent_id) != head(remote, repo)


def test_a_new_system_file_creates_and_attaches_a_block_and_its_removal_detaches_it(remote: Remote) -> None:
    agent_id = remote.new_agent([{"label": "human", "value": "Name: Bob"}])
    repo = remote.clone(agent_id, "repo")
    commit_file(remote.git, repo, "system/projects.md", "---\ndescription: What we work on\n---\nmemvm MemFS")

    created = remote.push(repo)
    projects = remote.block(agent_id, "projects")
    prompt_with_projects = remote.prompt(agent_id)
    remote.git.ok("rm", "-q", "system/projects.md", cwd=repo)
    remote.git.ok("commit", "-qm", "drop projects", cwd=repo)
    removed = remote.push(repo)

    assert created.returncode == 0 and removed.returncode == 0, created.stderr + removed.stderr
    assert (projects["value"], projects["description"]) == ("memvm MemFS", "What we work on")
    assert "memvm MemFS" in prompt_with_projects and "memvm MemFS" not in remote.prompt(agent_id)
    assert remote.labels(agent_id) == {"human"}
    kept = remote.api.get(f"/v1/blocks/{projects['id']}")
    assert kept.status_code == 200 and kept.json()["value"] == "memvm MemFS"


def test_reference_and_skill_files_round_trip_byte_for_byte_and_stay_out_of_the_prompt(remote: Remote) -> None:
    agent_id = remote.new_agent([{"label": "human", "value": "Name: Bob"}])
    repo = remote.clone(agent_id, "repo")
    notes = "# Notes\r\nTea at five. Ünïcödé, no final newline".encode()
    script = b"#!/bin/sh\necho skill\n"
    (repo / "reference").mkdir()
    (repo / "reference/notes.md").write_bytes(notes)
    (repo / "skills/x").mkdir(parents=True)
    (repo / "skills/x/run.sh").write_bytes(script)
    (repo / "skills/x/run.sh").chmod(0o755)
    remote.git.ok("add", "-A", cwd=repo)
    remote.git.ok("commit", "-qm", "notes and a skill", cwd=repo)

    pushed = remote.push(repo)
    # memvm's own next commit (a REST edit) rebuilds the tree around the stored files.
    remote.edit(remote.block(agent_id, "human")["id"], "Name: Bob, edited")
    fresh = remote.clone(agent_id, "fresh")

    assert pushed.returncode == 0, pushed.stderr
    assert remote.git.ok("log", "-1", "--format=%an", cwd=fresh).strip() == "api_key"
    assert (fresh / "reference/notes.md").read_bytes() == notes
    assert (fresh / "skills/x/run.sh").read_bytes() == script
    assert remote.git.ok("ls-files", "-s", "skills/x/run.sh", cwd=fresh).startswith("100755 ")
    assert os.stat(fresh / "skills/x/run.sh").st_mode & stat.S_IXUSR
    assert "Tea at five" not in remote.prompt(agent_id) and "echo skill" not in remote.prompt(agent_id)
    assert remote.labels(agent_id) == {"human"}
    every_block = remote.api.get("/v1/blocks/").json()
    assert {block["label"] for block in every_block} == {"human"}


async def test_git_log_of_a_block_file_is_its_history_through_rest_tool_and_push_edits(remote: Remote, llm: ScriptedLLM) -> None:
    """Every version here changes the file. One that changes only what the file does not show (metadata,
    tags) is a commit with the same tree, which `git log -- <file>` leaves out."""
    agent_id = remote.new_agent([{"label": "human", "value": "Name: Bob"}], model="openai/scripted-model")
    human = remote.block(agent_id, "human")
    for value in ("Name: Bob Smith", "Name: Bob Smith, pilot"):
        remote.edit(human["id"], value)
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "pilot", "new_string": "glider pilot"})])
    llm.reply("Noted.")
    async with httpx.AsyncClient(base_url=remote.server.base_url, headers=dict(remote.api.headers), timeout=30) as http:
        turn = await http.post(f"/v1/agents/{agent_id}/messages", json={"input": "I fly gliders"})
    assert turn.status_code == 200 and turn.json()["messages"][-1]["content"] == "Noted.", turn.text
    repo = remote.clone(agent_id, "repo")
    edit_file(remote, repo, "system/human.md", "glider pilot", "glider pilot from Ulm")
    pushed = remote.push(repo)
    assert pushed.returncode == 0, pushed.stderr
    fresh = remote.clone(agent_id, "fresh")

    log = remote.git.ok("log", "--format=%H %an <%ae>", "--", "system/human.md", cwd=fresh).splitlines()
    history = remote.history(human["id"])

    assert len(log) == len(history) == 5
    assert log[0].split()[0] == head(remote, repo)  # the pushed commit, as the client made it
    assert log[0].endswith("Tester <tester@example.com>")
    actors = [f"{entry['actor']['type']} <{entry['actor']['id']}@memvm>" for entry in history[1:]]
    assert [line.split(" ", 1)[1] for line in log[1:]] == actors
    assert actors[0] == f"agent <{agent_id}@memvm>" and actors[1] == f"api_key <{remote.server.key_id}@memvm>"


def test_a_file_without_a_limit_line_keeps_the_blocks_limit(remote: Remote) -> None:
    agent_id = remote.new_agent([{"label": "human", "value": "Name: Bob", "limit": 300, "description": "who I talk to"}])
    repo = remote.clone(agent_id, "repo")
    assert "limit: 300\n" in (repo / "system/human.md").read_text()
    # As Letta Code's memory tool writes a file: description (and read_only), never limit.
    commit_file(remote.git, repo, "system/human.md", "---\ndescription: who I talk to\n---\nName: Bob Smith")

    pushed = remote.push(repo)
    after = remote.block(agent_id, "human")

    assert pushed.returncode == 0, pushed.stderr
    assert (after["value"], after["limit"], after["description"]) == ("Name: Bob Smith", 300, "who I talk to")
