"""The MemFS branch as memory makes it: one commit per stored block version, authored by whoever
made it, stored once and never rewritten."""

from dulwich.objects import Commit

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.uow import transaction
from memvm.memfs import objects as git
from memvm.memfs import service as memfs
from memvm.memfs.schemas import RepoSnapshot
from tests.support.api import create_agent


async def fetch(sessionmaker, agent_id: str) -> RepoSnapshot:
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        return await memfs.snapshot(session, agent_id)


def log(snapshot: RepoSnapshot) -> list[Commit]:
    """Newest first, along first parents."""
    commits, sha = [], snapshot.head
    while sha:
        commit = snapshot.objects[sha]
        commits.append(commit)
        sha = commit.parents[0] if commit.parents else None
    return commits


def file_at(snapshot: RepoSnapshot, commit: Commit, path: str) -> bytes | None:
    entry = git.files_of(commit.tree, snapshot.objects).get(path)
    return snapshot.objects[entry[1]].as_raw_string() if entry else None


def log_of_file(snapshot: RepoSnapshot, path: str) -> list[bytes]:
    """`git log -- path`: the file's content at each commit that changed it, newest first."""
    contents = [file_at(snapshot, commit, path) for commit in log(snapshot)]
    return [c for c, older in zip(contents, [*contents[1:], None], strict=True) if c is not None and c != older]


async def human_block(client, agent_id: str) -> dict:
    blocks = (await client.get(f"/v1/agents/{agent_id}/core-memory/blocks")).json()
    return next(b for b in blocks if b["label"] == "human")


async def test_git_log_of_a_block_file_is_the_blocks_history(client, sessionmaker):
    agent = await create_agent(client, memory_blocks=[{"label": "human", "value": "Name: Bob", "limit": 200}])
    human = await human_block(client, agent["id"])
    for value in ("Name: Bob Smith", "Name: Robert Smith"):
        assert (await client.patch(f"/v1/blocks/{human['id']}", json={"value": value})).status_code == 200

    fetched = await fetch(sessionmaker, agent["id"])
    history = (await client.get(f"/v1/blocks/{human['id']}/history")).json()

    versions = log_of_file(fetched, "system/human.md")
    assert [v.rsplit(b"---\n", 1)[1].decode() for v in versions] == [entry["new"]["value"] for entry in history]
    assert b"limit: 200" in versions[0]
    authors = {commit.author.split(b" <")[0] for commit in log(fetched)}
    assert authors == {b"local"}  # every change here came from the API in local mode


async def test_fetching_again_changes_nothing_and_a_later_edit_only_adds_a_commit(client, sessionmaker):
    agent = await create_agent(client, memory_blocks=[{"label": "human", "value": "Name: Bob"}])
    human = await human_block(client, agent["id"])

    first = await fetch(sessionmaker, agent["id"])
    again = await fetch(sessionmaker, agent["id"])
    assert (await client.patch(f"/v1/blocks/{human['id']}", json={"value": "Name: Ann"})).status_code == 200
    later = await fetch(sessionmaker, agent["id"])

    assert again.head == first.head
    assert log(later)[1].id == first.head  # the new commit sits on the old head, which did not change
    assert file_at(later, log(later)[0], "system/human.md").endswith(b"Name: Ann")


async def test_a_detached_block_leaves_the_tree_in_one_more_commit(client, sessionmaker):
    agent = await create_agent(client, memory_blocks=[{"label": "human", "value": "Name: Bob"}, {"label": "notes", "value": "n"}])
    notes = next(b for b in (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks")).json() if b["label"] == "notes")
    before = await fetch(sessionmaker, agent["id"])
    detached = await client.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/detach/{notes['id']}")
    assert detached.status_code == 200, detached.text

    after = await fetch(sessionmaker, agent["id"])

    assert file_at(before, log(before)[0], "system/notes.md") is not None
    assert file_at(after, log(after)[0], "system/notes.md") is None
    assert log(after)[1].id == before.head
