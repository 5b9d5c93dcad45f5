"""Vectors on the wire in pgvector's binary format: a dimension count, then the float4s, big-endian.
Packing 1,536 floats takes microseconds in C, where their text took 0.4 ms of formatting here and
about as long again of parsing in PostgreSQL; the embedding worker writes several vectors per turn.

Every connection of memvm's main engine (engine.build_engine) registers the codec at its first
checkout, or, on a database whose first migration has not created the extension yet, at its first
checkout after it has. orm/vector_type.Float4Vector then hands asyncpg the packed bytes."""

import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

_HEADER = struct.Struct(">HH")  # dimensions, unused
_REGISTERED = "memvm_binary_vectors"  # in a pooled connection's info: its codec is set

# The schema the extension was created in: its type is looked up there, whatever the search path.
_EXTENSION_SCHEMA = """
    SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector'
"""


def vector_bytes(vector: Sequence[float]) -> bytes:
    """`vector` in pgvector's binary format, its floats rounded to float4 as PostgreSQL stores them."""
    floats = array("f", vector)
    if sys.byteorder == "little":
        floats.byteswap()
    return _HEADER.pack(len(floats), 0) + floats.tobytes()


def vector_floats(data: bytes) -> list[float]:
    """The floats of a vector in pgvector's binary format."""
    dimensions, _ = _HEADER.unpack_from(data)
    floats = array("f")
    floats.frombytes(data[_HEADER.size : _HEADER.size + 4 * dimensions])
    if sys.byteorder == "little":
        floats.byteswap()
    return floats.tolist()


def send_vectors_in_binary(engine: AsyncEngine) -> None:
    """Each connection of `engine` sends and reads vectors in the binary format, from its first
    checkout on which the extension exists. A connection that cannot register the codec is replaced,
    as one that failed its ping (DisconnectionError)."""

    @event.listens_for(engine.sync_engine, "checkout")
    def checked_out(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection) -> None:
        if record.info.get(_REGISTERED):
            return
        try:
            record.info[_REGISTERED] = dbapi_connection.run_async(_set_codec)
        except Exception as exc:
            raise DisconnectionError(f"could not set up the connection's vector codec: {exc}") from exc


async def _set_codec(connection: Any) -> bool:
    schema = await connection.fetchval(_EXTENSION_SCHEMA)
    if schema is None:  # before the first migration: at a later checkout
        return False
    await connection.set_type_codec("vector", schema=schema, encoder=_encoded, decoder=vector_floats, format="binary")
    return True


def _encoded(value: Any) -> bytes:
    """Float4Vector packs what it binds; a vector bound otherwise is packed here: a list of floats, or
    pgvector's text ("[1,2,3]", as pgvector's own SQLAlchemy type sends it)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return vector_bytes([float(number) for number in value.strip("[]").split(",")])
    return vector_bytes(value)
