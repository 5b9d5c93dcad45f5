"""Debian's git CLI against a live `memvm serve` with keys required: what the MemFS end-to-end tests
(tests/e2e/test_memfs_git.py, test_memfs_push.py) share."""

import base64
import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.serve import child_env, free_port, serve

ADMIN_KEY = "admin-key-for-memfs-tests"
GIT_TIMEOUT = 60.0


class Git:
    """git in a clean home (no user or system config), never prompting."""

    def __init__(self, home: Path, base_url: str) -> None:
        self.home, self.base_url = home, base_url
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "Tester",
            "GIT_AUTHOR_EMAIL": "tester@example.com",
            "GIT_COMMITTER_NAME": "Tester",
            "GIT_COMMITTER_EMAIL": "tester@example.com",
        }

    def url(self, agent_id: str) -> str:
        return f"{self.base_url}/v1/git/{agent_id}/state.git"

    def __call__(self, *args: str, cwd: Path | None = None, header: str | None = None) -> subprocess.CompletedProcess[str]:
        options = ["-c", f"http.extraHeader={header}"] if header else []
        return subprocess.run(
            ["git", *options, *args], cwd=cwd or self.home, env=self.env, capture_output=True, text=True, timeout=GIT_TIMEOUT
        )

    def ok(self, *args: str, cwd: Path | None = None, header: str | None = None) -> str:
        done = self(*args, cwd=cwd, header=header)
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done.stdout


def basic(key: str, user: str = "letta") -> str:
    """What Letta Code sends on every git request."""
    return "Authorization: Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()


@dataclass(frozen=True)
class KeyedServer:
    """A live server with keys required, an organization's key (and its id), one agent without blocks."""

    base_url: str
    key: str
    key_id: str
    agent_id: str


@contextlib.contextmanager
def keyed_server(database_url: str, log: Path, **settings: str) -> Iterator[KeyedServer]:
    """`memvm serve` on `database_url` with an admin key, the organization `acme` and its first agent;
    `settings` are more MEMVM_* variables."""
    port = free_port()
    env = child_env(MEMVM_DATABASE_URL=database_url, MEMVM_ADMIN_API_KEY=ADMIN_KEY, **settings)
    with serve(log, env, "--port", str(port), port=port) as server:
        with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
            created = http.post(
                "/v1/admin/api-keys", json={"organization": "acme"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
            )
            key = created.json()["key"]
            agent = http.post(
                "/v1/agents/", json={"name": "memfs", "memory_blocks": []}, headers={"Authorization": f"Bearer {key}"}
            )
            assert agent.status_code == 200, agent.text
        yield KeyedServer(server.base_url, key, created.json()["id"], agent.json()["id"])


def first_push(git: Git, agent_id: str, header: str, text: str) -> Path:
    """A clone of the empty repository whose first commit, system/human.md, is pushed."""
    git.ok("-c", "init.defaultBranch=main", "clone", git.url(agent_id), "repo", header=header)
    repo = git.home / "repo"
    commit_file(git, repo, "system/human.md", text)
    git.ok("push", "origin", "main", cwd=repo, header=header)
    return repo


def block_value(base_url: str, key: str, agent_id: str) -> str:
    answer = httpx.get(f"{base_url}/v1/agents/{agent_id}/core-memory/blocks/human", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["value"])


def commit_file(git: Git, checkout: Path, path: str, text: str) -> None:
    (checkout / path).parent.mkdir(parents=True, exist_ok=True)
    (checkout / path).write_text(text)
    git.ok("add", "-A", cwd=checkout)
    git.ok("commit", "-qm", f"write {path}", cwd=checkout)
