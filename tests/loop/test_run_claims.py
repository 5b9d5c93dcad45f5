"""Background runs' claims, all held on one connection per process (runtime/loop/run_claims.py)."""

from memvm.db.engine import build_lock_engine
from memvm.runtime.loop.run_claims import RUN_CLAIM_CLASS, RunClaims, run_claimed

CLAIMS_SESSION = "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1"
END_CLAIMS_SESSION = "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1"


async def test_claims_are_held_until_released_and_survive_their_connection_ending(database_url, db):
    engine = build_lock_engine(database_url)
    claims = RunClaims(engine)
    try:
        await claims.claim("run-a")
        await claims.claim("run-b")
        await claims.release("run-b")
        held = [await run_claimed(engine, run_id) for run_id in ("run-a", "run-b")]

        # The database ends the claims connection: the next claim opens a new one and holds run-a again.
        await db.execute(END_CLAIMS_SESSION, RUN_CLAIM_CLASS)
        await claims.claim("run-c")
        after_reconnect = [await run_claimed(engine, run_id) for run_id in ("run-a", "run-b", "run-c")]
        sessions = await db.fetch(CLAIMS_SESSION, RUN_CLAIM_CLASS)

        await claims.close()
        after_close = [await run_claimed(engine, run_id) for run_id in ("run-a", "run-c")]
    finally:
        await engine.dispose()

    assert held == [True, False]
    assert after_reconnect == [True, False, True]
    assert len(sessions) == 1  # every claim on one connection
    assert after_close == [False, False]
