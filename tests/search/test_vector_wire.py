"""Vectors in pgvector's binary format (db/vectors.py), as memvm's engine sends and reads every vector:
PostgreSQL stores from the packed bytes the vector pgvector's own text gives, in every component,
small, large and negative ones included; what it sends back reads as the same floats."""

import random
import uuid

import pytest
from pgvector import Vector
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import bindparam, select, text

from memvm.config import Settings
from memvm.db.engine import build_engine
from memvm.db.vectors import vector_bytes, vector_floats
from memvm.orm.vector_type import Float4Vector
from tests.support.pg import admin_execute, with_database


def vectors() -> list[list[float]]:
    rng = random.Random(9)
    extremes = [1e-30, -1e-30, 3.0e38, -0.0, 0.0, 1 / 3, 123456789.123, -7.25e-8]
    return [[rng.gauss(0, 1) * rng.choice((1e-6, 1e-3, 1.0, 1e3)) for _ in range(1536)] for _ in range(5)] + [extremes]


async def test_packed_vectors_are_stored_as_pgvectors_text_gives_them(sessionmaker):
    async with sessionmaker() as session:
        for vector in vectors():
            stored = text("SELECT CAST(:packed AS vector) = CAST(:as_text AS text)::vector, CAST(:packed AS vector)")
            same, read_back = (
                await session.execute(stored, {"packed": vector_bytes(vector), "as_text": Vector._to_db(vector)})
            ).one()
            assert same, vector[:4]
            assert read_back == vector_floats(vector_bytes(vector))  # float4, read through the codec


async def test_a_vector_bound_without_our_type_is_packed_by_the_codec(sessionmaker):
    """A list of floats, and pgvector's text as pgvector's own column type binds it."""
    async with sessionmaker() as session:
        from_list = await session.scalar(text("SELECT CAST(:floats AS vector)"), {"floats": [0.25, -2.0]})
        as_pgvector_binds = select(bindparam("v", [0.25, -2.0], type_=VECTOR(2)).cast(Float4Vector(2)))
        from_text = await (await session.connection()).scalar(as_pgvector_binds)  # no table: no tenancy
    assert from_list == from_text == [0.25, -2.0]


async def test_a_vector_pgvector_refuses_is_a_database_error_not_a_wrong_row(sessionmaker):
    async with sessionmaker() as session:
        with pytest.raises(Exception, match="NaN not allowed"):
            await session.execute(text("SELECT CAST(:packed AS vector)"), {"packed": vector_bytes([1.0, float("nan")])})


def test_the_format_is_pgvectors():
    assert vector_bytes([1.0, -0.5]) == bytes.fromhex("0002 0000 3f800000 bf000000")
    assert vector_floats(bytes.fromhex("0002 0000 3f800000 bf000000")) == [1.0, -0.5]


async def test_a_connection_made_before_the_extension_existed_sends_vectors_once_it_does(server_url):
    """As in a first start: the pool's connection that ran the first migration is used afterwards."""
    name = f"memvm_wire_{uuid.uuid4().hex[:8]}"
    await admin_execute(server_url, f"CREATE DATABASE {name}")
    engine = build_engine(with_database(server_url, name), Settings(db_pool_size=1, db_max_overflow=0))
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE EXTENSION vector"))
        async with engine.connect() as connection:  # the same connection, checked out again
            dims = await connection.scalar(
                text("SELECT vector_dims(CAST(:packed AS vector))"), {"packed": vector_bytes([0.5] * 3)}
            )
        assert dims == 3
    finally:
        await engine.dispose()
        await admin_execute(server_url, f"DROP DATABASE {name} WITH (FORCE)")
