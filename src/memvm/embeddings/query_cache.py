"""Vectors of recent search queries, so a repeated search skips the model.

Agents repeat searches across turns and clients page through results; embedding one query costs
7-10 ms of CPU with the local model on a small box (bench/README.md), most of a search's time.
Stored passages and messages never go through here: their texts are unique.

Each vector is kept as float4s, as PostgreSQL stores and compares them (db/vectors.py sends them so): a
list of 1,536 Python floats takes 49 KB, its float4s 6 KB, so a full cache of OpenAI-sized query
vectors holds 3 MiB per HTTP process instead of 25. Every caller gets the same float4-rounded values,
whether the query was embedded now or before."""

from array import array
from collections import OrderedDict

from memvm.embeddings.ports import Embedder


class QueryVectors:
    """An LRU of (model, text) → vector. Not shared between processes; a miss just embeds."""

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._vectors: OrderedDict[tuple[str, str], array[float]] = OrderedDict()

    async def vector(self, embedder: Embedder, text: str) -> list[float]:
        key = (embedder.model, text)
        stored = self._vectors.get(key)
        if stored is not None:
            self._vectors.move_to_end(key)
            return stored.tolist()
        [vector] = await embedder.embed([text])
        self._vectors[key] = stored = array("f", vector)
        while len(self._vectors) > self._capacity:
            self._vectors.popitem(last=False)
        return stored.tolist()
