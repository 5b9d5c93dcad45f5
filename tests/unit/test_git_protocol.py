"""memfs/git_protocol.py's own rules for a pushed ref update, before the service sees the push."""

from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Commit, Tree

from memvm.memfs.git_protocol import MAIN, ref_update_refusal

ZERO = b"0" * 40


def commit(store: MemoryObjectStore, *parents: bytes, message: str = "m") -> bytes:
    tree = Tree()
    made = Commit()
    made.tree, made.parents = tree.id, list(parents)
    made.author = made.committer = b"T <t@example.com>"
    made.author_time = made.commit_time = 0
    made.author_timezone = made.commit_timezone = 0
    made.message = message.encode()
    store.add_objects([(tree, None), (made, None)])
    return made.id


def test_fast_forwards_of_main_pass_and_a_first_push_needs_no_head():
    store = MemoryObjectStore()
    root = commit(store)
    child = commit(store, root)
    grandchild = commit(store, child)

    assert ref_update_refusal(MAIN, root, grandchild, root, store) is None
    assert ref_update_refusal(MAIN, ZERO, child, None, store) is None


def test_other_refs_deletion_stale_and_forced_updates_and_merges_are_refused():
    store = MemoryObjectStore()
    root = commit(store)
    head = commit(store, root, message="server")
    rewritten = commit(store, root, message="rewritten")
    merge = commit(store, head, rewritten)

    other = ref_update_refusal(b"refs/heads/other", head, rewritten, head, store)
    deleted = ref_update_refusal(MAIN, head, ZERO, head, store)
    stale = ref_update_refusal(MAIN, root, rewritten, head, store)
    forced = ref_update_refusal(MAIN, head, rewritten, head, store)
    merged = ref_update_refusal(MAIN, head, merge, head, store)
    unknown = ref_update_refusal(MAIN, head, b"1" * 40, head, store)

    assert (
        other is not None and other.message == "refusing to update refs/heads/other: memvm keeps one branch, main; push to main"
    )
    assert deleted is not None and deleted.message.startswith("refusing to delete main")
    assert stale is not None and stale.message.startswith("non-fast-forward: main has moved on the server")
    assert forced is not None and forced.message.startswith("non-fast-forward: the pushed main does not contain the server's")
    assert merged is not None and merged.message.startswith(f"merge commit {merge[:7].decode()}: memvm keeps a linear history")
    assert unknown is not None and "is not a commit the push sent" in unknown.message
