"""Git objects of an agent's repository, built and read as flat maps ({path: (mode, blob sha)}), so
the service never walks nested trees itself. Every object built here is deterministic: the same
inputs give the same ids."""

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree

FILE_MODE = 0o100644
TREE_MODE = 0o040000
Files = dict[str, tuple[int, bytes]]  # path → (mode, blob sha, hex)


class ObjectLookup(Protocol):
    """Objects by hex sha: a dict, or a dulwich object store."""

    def __getitem__(self, sha: bytes) -> ShaFile: ...


@dataclass(frozen=True)
class Signature:
    """Who made a commit, and when (seconds, UTC)."""

    name: str
    email: str
    when: datetime

    @property
    def identity(self) -> bytes:
        return f"{self.name} <{self.email}>".encode()


def blob(data: bytes) -> Blob:
    return Blob.from_string(data)


def trees(files: Files) -> tuple[bytes, list[Tree]]:
    """The root tree's id and every tree object of the flat file map (the root last)."""
    built: list[Tree] = []

    def build(prefix: str) -> bytes:
        tree = Tree()
        children: dict[str, None] = {}
        for path, (mode, sha) in files.items():
            if not path.startswith(prefix):
                continue
            name, _, rest = path[len(prefix) :].partition("/")
            if rest:
                children.setdefault(name)
            else:
                tree.add(name.encode(), mode, ObjectID(sha))
        for name in children:
            tree.add(name.encode(), TREE_MODE, ObjectID(build(f"{prefix}{name}/")))
        built.append(tree)
        return tree.id

    root = build("")
    return root, built


def commit(tree: bytes, parent: bytes | None, author: Signature, message: str) -> Commit:
    made = Commit()
    made.tree = ObjectID(tree)
    made.parents = [ObjectID(parent)] if parent else []
    made.author = made.committer = author.identity
    made.author_time = made.commit_time = int(author.when.timestamp())
    made.author_timezone = made.commit_timezone = 0
    made.message = message.encode()
    return made


def files_of(tree_id: bytes, objects: ObjectLookup, prefix: str = "") -> Files:
    """The flat file map of a tree (its blobs by path)."""
    found: Files = {}
    tree = objects[tree_id]
    assert isinstance(tree, Tree)
    for entry in tree.items():
        path = prefix + entry.path.decode()
        if entry.mode == TREE_MODE:
            found |= files_of(entry.sha, objects, f"{path}/")
        else:
            found[path] = (entry.mode, entry.sha)
    return found


def reachable_from_tree(commit: Commit, objects: ObjectLookup) -> list[ShaFile]:
    """A commit with its tree, subtrees and blobs (not its parents)."""
    found: list[ShaFile] = [commit]
    pending = [commit.tree]
    while pending:
        item = objects[pending.pop()]
        found.append(item)
        if isinstance(item, Tree):
            pending.extend(entry.sha for entry in item.items())
    return found


def from_raw(type_num: int, data: bytes) -> ShaFile:
    return ShaFile.from_raw_string(type_num, data)
