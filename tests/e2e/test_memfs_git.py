"""MemFS with Debian's git CLI against a live `memvm serve`: clone, push, refusals, authentication.
git 2.39 asks for protocol v2 and falls back to v0, which is what memvm speaks."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.memfs_git import GIT_TIMEOUT, Git, basic, block_value, commit_file, first_push, keyed_server


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """A server with keys required; (base url, an organization's key, one of its agents, without blocks)."""
    with keyed_server(database_url, tmp_path / "serve.log") as server:
        yield server.base_url, server.key, server.agent_id


def test_clone_of_an_empty_repository_then_a_first_push_then_a_refused_one_that_changes_nothing(
    served: tuple[str, str, str], tmp_path: Path
) -> None:
    base_url, key, agent_id = served
    git = Git(tmp_path, base_url)
    header = basic(key)

    empty = git("-c", "init.defaultBranch=main", "clone", git.url(agent_id), "first", header=header)
    first = tmp_path / "first"
    commit_file(git, first, "system/human.md", "---\ndescription: who I talk to\nlimit: 20\n---\nName: Bob")
    git.ok("push", "-u", "origin", "main", cwd=first, header=header)
    git.ok("clone", git.url(agent_id), "second", header=header)
    second = tmp_path / "second"

    assert empty.returncode == 0 and "cloned an empty repository" in empty.stderr
    assert block_value(base_url, key, agent_id) == "Name: Bob"
    assert git.ok("symbolic-ref", "HEAD", cwd=second).strip() == "refs/heads/main"
    assert git.ok("rev-parse", "HEAD", cwd=second) == git.ok("rev-parse", "HEAD", cwd=first)

    # Two commits: the first alone would be accepted; the push is refused as a whole.
    human = (second / "system/human.md").read_text()
    commit_file(git, second, "system/human.md", human.replace("Name: Bob", "Name: Al"))
    commit_file(git, second, "system/human.md", human.replace("Name: Bob", "Name: Bob, who talks a lot"))
    over = git("push", "origin", "main", cwd=second, header=header)
    remote_head = git.ok("ls-remote", git.url(agent_id), "refs/heads/main", header=header).split()[0]

    assert over.returncode == 1
    assert "remote: nothing was applied" in over.stderr
    assert "[remote rejected] main -> main (system/human.md:" in over.stderr and "limit" in over.stderr, over.stderr
    assert remote_head == git.ok("rev-parse", "HEAD~2", cwd=second).strip()
    assert block_value(base_url, key, agent_id) == "Name: Bob"


def test_forced_push_other_branches_and_deletion_are_refused_by_the_server(served: tuple[str, str, str], tmp_path: Path) -> None:
    base_url, key, agent_id = served
    git = Git(tmp_path, base_url)
    header = basic(key)
    repo = first_push(git, agent_id, header, "one\n")
    git.ok("commit", "-q", "--amend", "-m", "rewritten", cwd=repo)

    forced = git("push", "--force", "origin", "main", cwd=repo, header=header)
    branch = git("push", "origin", "main:refs/heads/other", cwd=repo, header=header)
    deleted = git("push", "origin", ":main", cwd=repo, header=header)

    assert forced.returncode == 1 and "[remote rejected] main -> main (non-fast-forward:" in forced.stderr, forced.stderr
    assert branch.returncode == 1 and "memvm keeps one branch, main" in branch.stderr, branch.stderr
    assert deleted.returncode == 1 and "refusing to delete main" in deleted.stderr, deleted.stderr


def test_bearer_basic_credential_helper_and_wrong_key(served: tuple[str, str, str], tmp_path: Path) -> None:
    base_url, key, agent_id = served
    git = Git(tmp_path, base_url)
    url = git.url(agent_id)
    with_user = url.replace("http://", f"http://anyone:{key}@")  # no header: git asks after the 401's Basic challenge

    bearer = git("ls-remote", url, header=f"Authorization: Bearer {key}")
    helper = git("ls-remote", with_user)
    wrong_header = git("ls-remote", url, header=basic("mvk_wrong"))  # git then asks for credentials
    wrong = git("ls-remote", url.replace("http://", "http://anyone:mvk_wrong@"))
    missing = git("ls-remote", url)
    challenge = httpx.get(f"{url}/info/refs", params={"service": "git-upload-pack"}, headers={"Authorization": "Bearer nope"})

    assert bearer.returncode == 0 and helper.returncode == 0, bearer.stderr + helper.stderr
    assert wrong.returncode != 0 and "Authentication failed" in wrong.stderr, wrong.stderr
    assert wrong_header.returncode != 0 and "could not read Username" in wrong_header.stderr, wrong_header.stderr
    assert missing.returncode != 0 and "could not read Username" in missing.stderr, missing.stderr
    assert challenge.status_code == 401 and challenge.headers["www-authenticate"] == 'Basic realm="memvm"'


def test_a_fetch_with_many_local_commits_sends_a_gzipped_body(served: tuple[str, str, str], tmp_path: Path) -> None:
    """git gzips an upload-pack request over 1 KiB. Its rounds offer 16, 16, then 32 unpushed commits
    as `have` lines (50 bytes each), newest first: the third round, over 1 KiB, is gzipped. The local
    commits are dated after the common one, which git would otherwise offer (and stop at) first."""
    base_url, key, agent_id = served
    git = Git(tmp_path, base_url)
    header = basic(key)
    repo = first_push(git, agent_id, header, "base\n")
    git.ok("clone", git.url(agent_id), "other", header=header)
    commit_file(git, tmp_path / "other", "system/human.md", "moved on\n")
    git.ok("push", "origin", "main", cwd=tmp_path / "other", header=header)
    for number in range(80):
        git.env["GIT_COMMITTER_DATE"] = f"@{4_000_000_000 + number} +0000"  # 2096
        git.ok("commit", "-q", "--allow-empty", "-m", f"local {number}", cwd=repo)

    traced = subprocess.run(
        ["git", "-c", f"http.extraHeader={header}", "fetch", "origin"],
        cwd=repo,
        env={**git.env, "GIT_TRACE_CURL": "1", "GIT_TRACE_CURL_NO_DATA": "1"},
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
    )

    assert traced.returncode == 0, traced.stderr
    assert "Content-Encoding: gzip" in traced.stderr
    assert git.ok("rev-parse", "origin/main", cwd=repo) == git.ok("rev-parse", "HEAD", cwd=tmp_path / "other")
