"""The migrations build exactly the schema the ORM models describe (no drift either way)."""

import warnings

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from memvm.db.base import Base
from memvm.orm import vector_index  # noqa: F401  (every model module is imported by memvm.orm)


def include_object(obj, name, type_, reflected, compare_to) -> bool:
    # The partial HNSW expression indexes are written in SQL; autogenerate cannot compare them
    # (the same rule as migrations/env.py).
    return not (type_ == "index" and name and "_embedding_" in name)


def differences(connection) -> list:
    context = MigrationContext.configure(connection, opts={"compare_type": True, "include_object": include_object})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Expression compare cannot proceed.*")
        return compare_metadata(context, Base.metadata)


async def test_migrated_database_matches_the_models(database_url):
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as connection:
            diff = await connection.run_sync(differences)
    finally:
        await engine.dispose()

    assert diff == []
