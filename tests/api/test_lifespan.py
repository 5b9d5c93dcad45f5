"""The app's lifespan (main.py): whatever it started is stopped when it ends, and when a start fails
half-way, so that neither leaves a connection to the database or a task of the process behind."""

import asyncio

import pytest

from memvm.accounts.exposure import ExposureRefused
from tests.support.api import build_app

# Client sessions only: an autovacuum worker on the test database is listed there too.
OTHER_BACKENDS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND backend_type = 'client backend'"
)


async def connections_left(db) -> int:
    """The app's connections to the test database, once their backends had a moment to exit."""
    for _ in range(50):
        if (count := await db.fetchval(OTHER_BACKENDS)) == 0:
            return 0
        await asyncio.sleep(0.1)
    return count


async def test_a_stopped_app_leaves_no_connection_and_no_task(settings, db):
    app = build_app(settings)
    async with app.router.lifespan_context(app):
        app.state.runtime.in_background(asyncio.sleep(3600))
        (background_turn,) = app.state.runtime.background
        assert await db.fetchval(OTHER_BACKENDS) > 0  # the key cache listens, the pool holds what it used

    assert background_turn.cancelled()
    assert await connections_left(db) == 0


async def test_a_start_refused_half_way_stops_what_had_started(settings, db):
    """No key, and an address beyond loopback: refused at the gate, after the database and the key
    cache's LISTEN connection were opened."""
    app = build_app(settings.model_copy(update={"host": "0.0.0.0", "insecure": False, "admin_api_key": None}))

    with pytest.raises(ExposureRefused):
        async with app.router.lifespan_context(app):
            pass

    assert await connections_left(db) == 0
