"""Every agent field memvm stores travels through an agent file (the table: tests/support/agent_fields.py):
set in the real Letta 0.16.8 export, imported over HTTP as the SDK sends it, read back over the API;
then exported (in either format) and imported again, and read back the same. memvm's own settings
and the tool variables' values travel as memvm and Letta carry them."""

import json

import pytest

from tests.support.agent_fields import EXPECTED, MASKED, VARIABLES, letta_export, shown, variables, with_every_field
from tests.support.agentfiles import export_file, import_one

# memvm's own settings, which a Letta file cannot carry: set over the API, carried by memvm's export.
MEMVM_SETTINGS = {
    "memory_render_mode": "line_numbered",
    "llm_config": {"model": "gpt-4o-mini", "model_endpoint": "http://127.0.0.1:9/v1", "context_window": 9000},
    "embedding": "openai/text-embedding-3-small",
    "embedding_config": {"embedding_endpoint_type": "openai", "embedding_model": "text-embedding-3-small", "embedding_dim": 1536},
}


@pytest.mark.parametrize("legacy", [False, True], ids=["current-format", "legacy-format"])
async def test_every_letta_agent_field_survives_import_and_a_round_trip(client, legacy: bool):
    imported = await import_one(client, with_every_field())
    again = await import_one(client, await export_file(client, imported["id"], legacy=legacy))

    assert shown(imported) == EXPECTED
    assert shown(again) == EXPECTED


async def test_memvm_settings_survive_a_round_trip(client):
    imported = await import_one(client, letta_export())
    patched = await client.patch(f"/v1/agents/{imported['id']}", json=MEMVM_SETTINGS)
    assert patched.status_code == 200, patched.text
    original = patched.json()

    again = await import_one(client, await export_file(client, original["id"], legacy=False))

    assert original["llm_config"]["model_endpoint"] == "http://127.0.0.1:9/v1"
    assert original["embedding_config"] == MEMVM_SETTINGS["embedding_config"]
    assert {name: again[name] for name in MEMVM_SETTINGS} == {name: original[name] for name in MEMVM_SETTINGS}


async def test_import_secrets_fill_the_variables_the_file_names_and_are_never_exported(client, db):
    file = letta_export(secrets=VARIABLES, tool_exec_environment_variables=VARIABLES)

    imported = await import_one(client, file, secrets=json.dumps({"CRM_TOKEN": "tok-123", "EXTRA": "x"}))
    stored = await db.fetchval("SELECT tool_secrets FROM agent WHERE id = $1", imported["id"])
    response = await client.get(f"/v1/agents/{imported['id']}/export")

    assert json.loads(stored) == {"CRM_TOKEN": "tok-123", "REGION": "", "EXTRA": "x"}
    assert variables("secrets")(imported) == dict.fromkeys(["CRM_TOKEN", "EXTRA", "REGION"], MASKED)
    assert response.json()["agents"][0]["secrets"] == {"CRM_TOKEN": "", "EXTRA": "", "REGION": ""}
    assert "tok-123" not in response.text
