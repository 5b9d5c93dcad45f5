"""A queue's worker: what wakes it, and the turns organizations take in its batches."""

import asyncio

from memvm.db.queue_worker import QueueWorker, Rotation


async def test_rows_queued_while_an_empty_batch_runs_wake_the_worker_at_once():
    wakeup = asyncio.Event()
    batches = 0

    async def drain() -> int:
        nonlocal batches
        batches += 1
        if batches == 1:
            wakeup.set()  # queued while this batch looked, too late for it
        return 0

    worker = QueueWorker("test", drain, wakeup, poll_seconds=60)
    worker.start()
    try:
        async with asyncio.timeout(5):  # not the 60 s poll
            while batches < 2:
                await asyncio.sleep(0.01)
    finally:
        await worker.stop()


def test_each_batch_starts_with_the_next_organization_and_new_ones_take_their_place():
    rotation = Rotation()

    firsts = [rotation.order("message", ["b", "a", "c"])[0] for _ in range(4)]
    with_a_new_one = rotation.order("message", ["a", "bb", "c"])  # b is done, bb has rows now
    other_queue = rotation.order("file_chunk", ["c", "a"])

    assert firsts == ["a", "b", "c", "a"]
    assert with_a_new_one == ["bb", "c", "a"]
    assert other_queue == ["a", "c"]
