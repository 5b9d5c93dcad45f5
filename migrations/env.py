"""Alembic environment. memvm passes an open connection in `config.attributes["connection"]`;
when run as plain `alembic`, the URL comes from memvm Settings (embedded server if unset)."""

import asyncio

from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine

from memvm.orm import Base

target_metadata = Base.metadata


def include_object(obj, name, type_, reflected, compare_to) -> bool:
    # Partial HNSW expression indexes are created in SQL; autogenerate cannot compare them.
    return not (type_ == "index" and name and "_embedding_" in name)


def run_with_connection(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True, include_object=include_object)
    with context.begin_transaction():
        context.run_migrations()


async def run_standalone() -> None:
    from memvm.config import Settings
    from memvm.db.database import resolve_database_url

    engine = create_async_engine(resolve_database_url(Settings()))
    async with engine.connect() as connection:
        await connection.run_sync(run_with_connection)
        await connection.commit()
    await engine.dispose()


connection = context.config.attributes.get("connection")
if connection is not None:
    run_with_connection(connection)
else:
    asyncio.run(run_standalone())
