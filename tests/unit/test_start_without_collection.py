"""`memvm serve` imports its modules with the cyclic garbage collector paused (processes.py): what
the imports create is frozen at the end, and collection resumes for what comes after."""

import gc

from memvm.processes import starting_without_collection


class _Node:
    def __init__(self) -> None:
        self.itself = self  # a cycle: only the cyclic collector can free it


def test_nothing_is_collected_during_the_start_and_what_it_made_is_frozen() -> None:
    assert gc.isenabled()
    frozen_before = gc.get_freeze_count()
    collections_before = sum(generation["collections"] for generation in gc.get_stats())
    try:
        with starting_without_collection():
            assert not gc.isenabled()
            kept = [_Node() for _ in range(5_000)]  # past generation 0's threshold many times over
            assert sum(generation["collections"] for generation in gc.get_stats()) == collections_before
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen_before + len(kept)
    finally:
        gc.unfreeze()


def test_collection_resumes_after_a_start_that_failed() -> None:
    try:
        with starting_without_collection():
            raise RuntimeError("the database would not start")
    except RuntimeError:
        pass
    finally:
        gc.unfreeze()
    assert gc.isenabled()
