"""`memvm blocks history|undo|redo|restore` against a database: the same history and the same rules
as the REST routes, with the change recorded as made by `cli`."""

import json

import httpx

from tests.support.serve import child_env, memvm


async def test_history_undo_redo_and_restore_from_the_command_line(client: httpx.AsyncClient, database_url: str) -> None:
    block = (await client.post("/v1/blocks/", json={"label": "notes", "value": "one"})).json()
    for value in ("two", "three"):
        assert (await client.patch(f"/v1/blocks/{block['id']}", json={"value": value})).status_code == 200
    env = child_env(MEMVM_DATABASE_URL=database_url)

    undone = memvm(env, "blocks", "undo", block["id"])
    assert undone.returncode == 0, undone.stderr
    assert json.loads(undone.stdout)["value"] == "two" and json.loads(undone.stdout)["version"] == 4
    redone = memvm(env, "blocks", "redo", block["id"], "--if-match", "4")
    assert redone.returncode == 0, redone.stderr
    assert json.loads(redone.stdout)["value"] == "three"
    restored = memvm(env, "blocks", "restore", block["id"], "1")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["value"] == "one"

    stale = memvm(env, "blocks", "undo", block["id"], "--if-match", "2")
    nothing = memvm(env, "blocks", "redo", block["id"])
    elsewhere = memvm(env, "blocks", "undo", block["id"], "--org", "nobody")
    bad_limit = memvm(env, "blocks", "history", block["id"], "--limit", "0")
    assert stale.returncode == 1 and "version" in stale.stderr
    assert nothing.returncode == 1 and "nothing to redo" in nothing.stderr
    assert elsewhere.returncode == 1 and "No organization named 'nobody'" in elsewhere.stderr
    assert bad_limit.returncode == 2 and "--limit: 0 is not between 1 and 1000" in bad_limit.stderr

    shown = memvm(env, "blocks", "history", block["id"], "--limit", "4", "--diff")
    assert shown.returncode == 0, shown.stderr
    entries = json.loads(shown.stdout)
    assert [e["change"] for e in entries] == ["restore", "redo", "undo", "update"]
    assert [e["actor"]["type"] for e in entries] == ["cli", "cli", "cli", "local"]  # local: no keys configured
    assert entries[0]["restored_version"] == 1 and entries[0]["diff"].startswith("---")
    over_rest = (await client.get(f"/v1/blocks/{block['id']}/history", params={"limit": 4})).json()
    assert [e["version"] for e in over_rest] == [e["version"] for e in entries] == [6, 5, 4, 3]
