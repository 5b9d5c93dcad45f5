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
