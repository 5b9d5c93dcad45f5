"""A vector's text (orm/vector_type.vector_text, how memvm sends every vector) is the vector pgvector stores from its own
formatting: the same float4 in every component, small, large and negative ones included."""

import random

from pgvector import Vector

from memvm.orm.vector_type import vector_text


def vectors() -> list[list[float]]:
    rng = random.Random(9)
    extremes = [1e-30, -1e-30, 3.0e38, -0.0, 0.0, 1 / 3, 123456789.123, -7.25e-8]
    return [[rng.gauss(0, 1) * rng.choice((1e-6, 1e-3, 1.0, 1e3)) for _ in range(1536)] for _ in range(5)] + [extremes]


async def test_the_text_reads_back_as_the_vector_pgvectors_own_text_gives(db):
    for vector in vectors():
        same = await db.fetchval("SELECT $1::text::vector = $2::text::vector", vector_text(vector), Vector._to_db(vector))
        assert same, vector[:4]


def test_the_text_is_pgvectors_shape():
    assert vector_text([1.0, -0.5, 0.25]) == "[1,-0.5,0.25]"
