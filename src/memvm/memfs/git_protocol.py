"""Git's smart HTTP protocol (v0, stateless RPC) over a RepoSnapshot, with dulwich's handlers.

Pure and synchronous: the routes (api/git.py) run these in a worker thread. A snapshot becomes a
throwaway in-memory repository per request: HEAD → refs/heads/main, the one branch. A push is
received into that scratch repository, checked against memvm's rules for the ref update (one
branch, no deletion, fast-forward only, linear history), and only then handed to `decide`, which
applies it or refuses it; a refusal reaches git as `ng <ref> <message>`, its details as `remote:` lines."""

from collections.abc import Callable, Mapping
from io import BytesIO
from typing import cast

from dulwich.errors import GitProtocolError
from dulwich.object_store import BaseObjectStore, MemoryObjectStore
from dulwich.objects import Commit, ObjectID, RawObjectID, ShaFile
from dulwich.protocol import SIDE_BAND_CHANNEL_PROGRESS, ReceivableProtocol, pkt_line
from dulwich.refs import Ref
from dulwich.repo import MemoryRepo
from dulwich.server import BackendRepo, DictBackend, PackHandler, ReceivePackHandler, UploadPackHandler

from memvm.errors import InvalidInput
from memvm.memfs.objects import ObjectLookup
from memvm.memfs.schemas import Refusal, RepoSnapshot

SERVICES = ("git-upload-pack", "git-receive-pack")
MAIN = b"refs/heads/main"
_ZERO = b"0" * 40
_REPO_PATH = "/"

Decide = Callable[[bytes, bytes, bytes, ObjectLookup], Refusal | None]


class Objects:
    """What `decide` gets: the pushed objects on top of the snapshot's, by hex sha (KeyError if absent)."""

    def __init__(self, store: BaseObjectStore) -> None:
        self._store = store

    def __getitem__(self, sha: bytes) -> ShaFile:
        return self._store[ObjectID(sha)]


def advertisement(service: str, snapshot: RepoSnapshot) -> bytes:
    """The answer to `GET info/refs?service=<service>`: the service line, then the refs."""
    out = BytesIO()
    out.write(pkt_line(f"# service={service}\n".encode()) + pkt_line(None))
    handler = _handler(service, snapshot, b"", out, advertise_refs=True)
    if service == "git-upload-pack" and snapshot.head is None:
        _advertise_no_refs(handler, out)  # dulwich's upload-pack sends no line at all for an empty repository
    else:
        _run(handler, service)
    return out.getvalue()


def upload_pack(snapshot: RepoSnapshot, body: bytes) -> bytes:
    """The answer to `POST git-upload-pack` (fetch, clone): the negotiation and the pack."""
    out = BytesIO()
    _run(_handler("git-upload-pack", snapshot, body, out), "git-upload-pack")
    return out.getvalue()


def receive_pack(snapshot: RepoSnapshot, body: bytes, decide: Decide) -> bytes:
    """The answer to `POST git-receive-pack` (push). `decide(ref, old, new, objects)` runs once per
    ref update that passed the protocol's own rules, after the pack is in; None accepts it."""
    out = BytesIO()
    handler = _handler("git-receive-pack", snapshot, body, out)
    assert isinstance(handler, _RuleReceivePack)
    handler.head, handler.decide = snapshot.head, decide
    _run(handler, "git-receive-pack")
    return out.getvalue()


def _run(handler: PackHandler, service: str) -> None:
    try:
        handler.handle()
    except GitProtocolError as error:  # a hang-up (body cut short) included
        raise InvalidInput(
            f"The request body is not a {service} request git would send ({error}); use git to fetch and push."
        ) from error


class _RuleReceivePack(ReceivePackHandler):
    """receive-pack whose update hook is memvm's rules, then `decide`."""

    head: bytes | None
    decide: Decide

    def _on_update(self, ref_name: Ref, old_sha: ObjectID, new_sha: ObjectID) -> bytes | None:
        objects = Objects(self.repo.object_store)
        refusal = ref_update_refusal(ref_name, old_sha, new_sha, self.head, objects)
        if refusal is None:
            refusal = self.decide(ref_name, old_sha, new_sha, objects)
        if refusal is None:
            return None
        for line in refusal.details:
            self.proto.write_sideband(SIDE_BAND_CHANNEL_PROGRESS, _one_line(line) + b"\n")
        return _one_line(refusal.message)


def ref_update_refusal(ref: bytes, old: bytes, new: bytes, head: bytes | None, objects: ObjectLookup) -> Refusal | None:
    """memvm's rules for any ref update, in git's words: main only, never deleted, fast-forward
    from the server's head through first parents, no merge commits."""
    if ref != MAIN:
        name = ref.decode(errors="replace")
        return Refusal(f"refusing to update {name}: memvm keeps one branch, main; push to main")
    if new == _ZERO:
        return Refusal("refusing to delete main: it is the agent's memory")
    if old != (head or _ZERO):
        return Refusal("non-fast-forward: main has moved on the server; fetch and rebase, then push again")
    return _history_refusal(new, head, objects)


def _history_refusal(new: bytes, head: bytes | None, objects: ObjectLookup) -> Refusal | None:
    """Walks from the pushed commit back to the server's head through first parents."""
    sha: bytes | None = new
    while sha != head:
        if sha is None:
            return Refusal("non-fast-forward: the pushed main does not contain the server's; fetch and rebase, then push again")
        try:
            commit = objects[sha]
        except KeyError:
            commit = None
        if not isinstance(commit, Commit):
            return Refusal(f"{sha.decode()} is not a commit the push sent")
        if len(commit.parents) > 1:
            return Refusal(
                f"merge commit {sha[:7].decode()}: memvm keeps a linear history; use git pull --rebase, then push again"
            )
        sha = commit.parents[0] if commit.parents else None
    return None


def _one_line(text: str) -> bytes:
    """A pkt-line of status must not break: newlines would end it early."""
    return " ".join(text.split()).encode()


def _advertise_no_refs(handler: PackHandler, out: BytesIO) -> None:
    """An empty repository as git's own upload-pack advertises it: one `capabilities^{}` line."""
    capabilities = b" ".join(handler.capabilities())
    out.write(pkt_line(_ZERO + b" capabilities^{}\0" + capabilities + b"\n") + pkt_line(None))


_HANDLERS: dict[str, type[PackHandler]] = {"git-upload-pack": UploadPackHandler, "git-receive-pack": _RuleReceivePack}


def _handler(service: str, snapshot: RepoSnapshot, body: bytes, out: BytesIO, *, advertise_refs: bool = False) -> PackHandler:
    proto = ReceivableProtocol(BytesIO(body).read, out.write)
    repositories: dict[str, BackendRepo] = {_REPO_PATH: _scratch_repository(snapshot)}  # type: ignore[dict-item]
    handler_class: Callable[..., PackHandler] = _HANDLERS[service]  # both take (backend, args, proto, ...)
    return handler_class(DictBackend(repositories), [_REPO_PATH], proto, stateless_rpc=True, advertise_refs=advertise_refs)


class _SharedObjects(MemoryObjectStore):
    """dulwich's in-memory store copies every object on the way in and on every read (8,000 copies
    of 2,000 objects for one clone: most of its time). The snapshot's objects are never changed,
    so they are handed over and read as they are."""

    def __init__(self, objects: Mapping[bytes, ShaFile]) -> None:
        super().__init__()
        self._data.update(cast(Mapping[ObjectID, ShaFile], objects))

    def __getitem__(self, name: ObjectID | RawObjectID) -> ShaFile:
        return self._data[self._to_hexsha(name)]

    def add_object(self, obj: ShaFile) -> None:
        self._data[obj.id] = obj


def _scratch_repository(snapshot: RepoSnapshot) -> MemoryRepo:
    repo = MemoryRepo()
    repo.object_store = _SharedObjects(snapshot.objects)
    repo.refs.set_symbolic_ref(Ref(b"HEAD"), Ref(MAIN))
    if snapshot.head is not None:
        repo.refs[Ref(MAIN)] = ObjectID(snapshot.head)
    return repo
