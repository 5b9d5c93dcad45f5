"""Vectors of recent search queries, so a repeated search skips the model.

Agents repeat searches across turns and clients page through results; embedding one query costs
7-10 ms of CPU with the local model on a small box (bench/README.md), most of a search's time.
Stored passages and messages never go through here: their texts are unique."""

from collections import OrderedDict

from memvm.embeddings.ports import Embedder


class QueryVectors:
    """An LRU of (model, text) → vector. Not shared between processes; a miss just embeds."""

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()

    async def vector(self, embedder: Embedder, text: str) -> list[float]:
        key = (embedder.model, text)
        vector = self._vectors.get(key)
        if vector is not None:
            self._vectors.move_to_end(key)
            return vector
        [vector] = await embedder.embed([text])
        self._vectors[key] = vector
        while len(self._vectors) > self._capacity:
            self._vectors.popitem(last=False)
        return vector
