"""MemFS: an agent's memory as a git repository on one branch, main.

Fetching catches the branch up with memory first: every block version stored since the last
commit becomes one commit, authored by whoever made it, at the time it was made, so `git log
system/human.md` walks the block's history. Commits are stored once made (memfs_commit) and never
rewritten, so what a client fetched stays true. A push is applied through the blocks' one write
path (limits, read-only, history with the pusher as actor, recompiles) in the caller's
transaction; a push that breaks a rule raises PushRefused and nothing of it stays."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dulwich.objects import Commit, ShaFile
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.agents import service as agents
from memvm.blocks import service as blocks
from memvm.blocks.schemas import BlockCreate
from memvm.errors import DomainError
from memvm.memfs import objects as git
from memvm.memfs import repository
from memvm.memfs.recent import Recent
from memvm.memfs.schemas import PushRefused, RepoSnapshot
from memvm.memory.memfs_layout import BlockFile, MemfsFileError, block_path, file_label, parse, render
from memvm.memory.rules import DEFAULT_BLOCK_LIMIT
from memvm.orm import Block, BlockChange

ZERO_SHA = b"0" * 40
# Plain files and executables; git's symlinks (120000) and submodules (160000) are refused.
_FILE_MODES = (0o100644, 0o100755)


@dataclass
class _Branch:
    """The branch being extended: its head, the files of the head's tree, and which version of
    which block that tree shows ({block_id: [path, version]})."""

    agent_id: str
    seq: int = 0
    head: bytes | None = None
    files: git.Files = field(default_factory=dict)
    shown: dict[str, list[Any]] = field(default_factory=dict)
    made: list[ShaFile] = field(default_factory=list)  # objects to store
    log: list[tuple[bytes, dict[str, list[Any]]]] = field(default_factory=list)  # new commits, what each shows

    def extend(self, author: git.Signature, message: str) -> Commit:
        root, trees = git.trees(self.files)
        made = git.commit(root, self.head, author, message)
        self.made.extend([*trees, made])
        self.record(made.id)
        return made

    def record(self, sha: bytes) -> None:
        self.head, self.seq = sha, self.seq + 1
        self.log.append((sha, {block_id: list(shown) for block_id, shown in self.shown.items()}))


class _ParsedObjects:
    """The parsed git objects of the agents this process served last. An object never changes (its
    id is its content), so only the ids are read again, and the objects not seen before."""

    def __init__(self, agents: int = 32) -> None:
        self._by_agent: Recent[str, dict[bytes, ShaFile]] = Recent(agents)

    async def of(self, session: AsyncSession, agent_id: str) -> dict[bytes, ShaFile]:
        """A copy, which the caller may extend: what the worker threads read must not change under them."""
        known = self._by_agent.get(agent_id) or {}
        missing = [sha for sha in await repository.object_ids(session, agent_id) if sha not in known]
        if missing:
            known |= await repository.objects_of(session, agent_id, missing)
        self._by_agent.put(agent_id, known)
        return dict(known)


_parsed = _ParsedObjects()


async def snapshot(session: AsyncSession, agent_id: str) -> RepoSnapshot:
    """The agent's repository, caught up with its memory."""
    await agents.get_agent(session, agent_id)
    await repository.lock_repository(session, agent_id)
    stored = await _parsed.of(session, agent_id)
    branch = await _caught_up(session, agent_id, stored)
    return RepoSnapshot(stored if branch.head else {}, branch.head)


async def _caught_up(session: AsyncSession, agent_id: str, stored: dict[bytes, ShaFile]) -> _Branch:
    last = await repository.head(session, agent_id)
    branch = _Branch(agent_id)
    if last is not None:
        head = last.sha.encode()
        commit = stored[head]
        assert isinstance(commit, Commit)
        branch = _Branch(agent_id, last.seq, head, git.files_of(commit.tree, stored), dict(last.blocks))
    attached = await agents.agent_blocks(session, agent_id)
    since = {b.id: _shown_version(branch, b.id) for b in attached}
    for row in await blocks.changes_after(session, since):
        _show(branch, row.block_id, row.label, row.version, _file_of(row))
        branch.extend(_author(row), _message(row, block_path(row.label)))
    _settle(branch, attached)
    stored.update({item.id: item for item in branch.made})
    await _store(session, branch)
    return branch


def _shown_version(branch: _Branch, block_id: str) -> int:
    return int(branch.shown[block_id][1]) if block_id in branch.shown else 0


def _show(branch: _Branch, block_id: str, label: str, version: int, content: bytes) -> None:
    path = block_path(label)
    previous = branch.shown.get(block_id)
    if previous is not None and previous[0] != path:
        branch.files.pop(previous[0], None)
    blob = git.blob(content)
    branch.made.append(blob)
    branch.files[path] = (git.FILE_MODE, blob.id)
    branch.shown[block_id] = [path, version]


def _settle(branch: _Branch, attached: Iterable[Block]) -> None:
    """One more commit when attachments changed (a detached block's file goes; a block whose
    history was pruned is shown as it is now)."""
    current = {block.id: block for block in attached}
    changed = False
    for block_id in [b for b in branch.shown if b not in current]:
        branch.files.pop(branch.shown.pop(block_id)[0], None)
        changed = True
    for block in current.values():
        if branch.shown.get(block.id) != [block_path(block.label), block.version]:
            _show(branch, block.id, block.label, block.version, _file_of(block))
            changed = True
    if changed:
        branch.extend(git.Signature("memvm", "memvm@memvm", datetime.now(UTC)), "Attached and detached blocks")


async def _store(session: AsyncSession, branch: _Branch) -> None:
    """The new objects, and a log entry per new commit (the last with the blocks it shows)."""
    await repository.store_objects(session, branch.agent_id, branch.made)
    first_seq = branch.seq - len(branch.log) + 1
    for offset, (sha, shown) in enumerate(branch.log):
        repository.append_commit(session, branch.agent_id, first_seq + offset, sha, shown)
    branch.made, branch.log = [], []


def _file_of(source: Block | BlockChange) -> bytes:
    content = BlockFile(description=source.description, read_only=source.read_only, limit=source.char_limit, value=source.value)
    return render(content, default_limit=DEFAULT_BLOCK_LIMIT)


def _author(row: BlockChange) -> git.Signature:
    who = row.actor_id or row.actor_type
    return git.Signature(row.actor_type, f"{who}@memvm", row.created_at)


def _message(row: BlockChange, path: str) -> str:
    trailers = [f"{name}: {value}" for name, value in (("Run", row.run_id), ("Step", row.step_id)) if value]
    body = "\n\n" + "\n".join(trailers) if trailers else ""
    return f"{row.change} {path} (version {row.version})\n{body}"


async def apply_push(
    session: AsyncSession, agent_id: str, old: bytes, new: bytes, pushed: git.ObjectLookup, *, actor: Actor
) -> None:
    """Apply the commits from `old` (the head the client saw) to `new`, oldest first, to the agent's
    blocks and files; append them to the branch as pushed, so the client's head is the server's."""
    await agents.get_agent(session, agent_id)
    await repository.lock_repository(session, agent_id)
    stored = await _parsed.of(session, agent_id)
    branch = await _caught_up(session, agent_id, stored)
    if old != (branch.head or ZERO_SHA):
        raise PushRefused(
            "non-fast-forward: main has moved on the server; fetch and rebase, then push again",
            ["memory changed since your last fetch (an API edit or the agent's own tool)"],
        )
    lookup = _Objects(pushed, stored)
    for commit in _commits_between(branch.head, new, lookup):
        files = git.files_of(commit.tree, lookup)
        await _apply_files(session, agent_id, branch.files, files, lookup, actor)
        branch.files = files
        branch.made.extend(git.reachable_from_tree(commit, lookup))
        branch.shown = {b.id: [block_path(b.label), b.version] for b in await agents.agent_blocks(session, agent_id)}
        branch.record(commit.id)
    await _store(session, branch)


class _Objects:
    """The pushed objects first, then those stored."""

    def __init__(self, pushed: git.ObjectLookup, stored: Mapping[bytes, ShaFile]) -> None:
        self.pushed, self.stored = pushed, stored

    def __getitem__(self, sha: bytes) -> ShaFile:
        try:
            return self.pushed[sha]
        except KeyError:
            return self.stored[sha]


def _commits_between(head: bytes | None, new: bytes, lookup: git.ObjectLookup) -> list[Commit]:
    """The pushed commits, oldest first, from `head` (exclusive) along first parents."""
    chain: list[Commit] = []
    sha: bytes | None = new
    while sha != head:
        if sha is None:
            raise PushRefused("non-fast-forward: the pushed history does not continue main; fetch and rebase, then push")
        commit = lookup[sha]
        assert isinstance(commit, Commit)
        if len(commit.parents) > 1:
            raise PushRefused("merge commits are refused: memvm keeps a linear history; use git pull --rebase")
        chain.append(commit)
        sha = commit.parents[0] if commit.parents else None
    return chain[::-1]


async def _apply_files(
    session: AsyncSession, agent_id: str, before: git.Files, after: git.Files, lookup: git.ObjectLookup, actor: Actor
) -> None:
    for path in sorted(before.keys() | after.keys()):
        if before.get(path) == after.get(path):
            continue
        try:
            await _apply_file(session, agent_id, path, after.get(path), lookup, actor)
        except MemfsFileError as error:
            raise PushRefused(str(error), ["nothing was applied"]) from error
        except PushRefused:
            raise
        except DomainError as error:
            raise PushRefused(f"{path}: {error.message}", ["nothing was applied"]) from error


async def _apply_file(
    session: AsyncSession, agent_id: str, path: str, entry: tuple[int, bytes] | None, lookup: git.ObjectLookup, actor: Actor
) -> None:
    if entry is not None and entry[0] not in _FILE_MODES:
        raise PushRefused(f"{path}: only plain files are stored (no symbolic links or submodules)")
    label = file_label(path, await agents.block_labels(session, agent_id))
    if label is None:
        if entry is None:
            await repository.remove_file(session, agent_id, path)
        else:
            await repository.put_file(session, agent_id, path, entry[0], entry[1])
        return
    block = await agents.find_block(session, agent_id, label, lock=True)
    if entry is None:
        if block is not None:
            await agents.detach_block(session, agent_id, block.id)
        return
    parsed = parse(path, lookup[entry[1]].as_raw_string())
    if block is None:
        spec = BlockCreate(
            label=label,
            value=parsed.value,
            limit=parsed.limit or DEFAULT_BLOCK_LIMIT,
            description=parsed.description,
            read_only=bool(parsed.read_only),
        )
        [created] = await blocks.create_blocks(session, [spec], actor=actor)
        await agents.attach_block(session, agent_id, created.id)
        return
    changes: dict[str, Any] = {"value": parsed.value}
    changes |= {k: v for k, v in (("description", parsed.description), ("read_only", parsed.read_only)) if v is not None}
    changes |= {"limit": parsed.limit} if parsed.limit is not None else {}
    if block.read_only and (parsed.value != block.value or parsed.read_only is False):
        raise PushRefused(f"{path}: the block is read-only; change it over the API instead")
    await blocks.apply_changes(session, block, changes, actor=actor)
