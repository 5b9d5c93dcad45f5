"""pgvector's column and parameter type, sent in pgvector's binary format (db/vectors.py): a value
is packed when it is bound, and a value that is packed already is sent as is, so a search that
compares several statements with one query vector packs it once (`vector_bytes`)."""

from typing import Any

from pgvector.sqlalchemy import VECTOR

from memvm.db.vectors import vector_bytes


class Float4Vector(VECTOR):
    cache_ok = True

    def bind_processor(self, dialect: Any) -> Any:
        def process(value: Any) -> bytes | None:
            return value if value is None or isinstance(value, bytes) else vector_bytes(value)

        return process

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        return None  # the codec reads a vector into its floats already
