import tracemalloc
from array import array

from memvm.embeddings.query_cache import QueryVectors


class CountingEmbedder:
    def __init__(self, model: str) -> None:
        self.model, self.dim, self.calls = model, 2, []

    async def embed(self, texts):
        self.calls.append(list(texts))
        return [[float(len(t)), float(len(self.calls))] for t in texts]


async def test_a_repeated_query_is_embedded_once_per_model():
    cache, a, b = QueryVectors(), CountingEmbedder("m/a"), CountingEmbedder("m/b")

    first = await cache.vector(a, "where do I live?")
    again = await cache.vector(a, "where do I live?")
    other_model = await cache.vector(b, "where do I live?")

    assert first == again and a.calls == [["where do I live?"]]
    assert b.calls == [["where do I live?"]] and other_model == [16.0, 1.0]


async def test_the_least_recently_used_query_is_dropped_at_capacity():
    cache, model = QueryVectors(capacity=2), CountingEmbedder("m/a")
    for text in ("one", "two", "one", "three"):  # "two" is the least recently used when "three" arrives
        await cache.vector(model, text)

    await cache.vector(model, "one")
    await cache.vector(model, "two")

    assert [c[0] for c in model.calls] == ["one", "two", "three", "two"]


async def test_vectors_are_kept_as_float4_and_come_back_alike_on_a_miss_and_a_hit():
    def thirds() -> list[float]:
        return [(i + 1) / 3 for i in range(1536)]  # new float objects each time, as a model's answers

    class ThirdsEmbedder(CountingEmbedder):
        async def embed(self, texts):
            return [thirds() for _ in texts]

    cache, model = QueryVectors(), ThirdsEmbedder("m/a")
    tracemalloc.start()
    try:
        first = await cache.vector(model, "query 0")
        again = await cache.vector(model, "query 0")
        del first, again
        for n in range(1, 100):
            await cache.vector(model, f"query {n}")
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert await cache.vector(model, "query 0") == array("f", thirds()).tolist() != thirds()
    # as lists of Python floats they held 4.8 MiB; as float4s 0.6 MiB
    assert held < 3 << 19, f"100 cached 1536-d vectors hold {held >> 10} KiB"
