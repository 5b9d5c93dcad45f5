"""Agent files stay inside the caller's organization: an import reuses only the caller's own tools,
and another organization's agent cannot be exported."""

from pathlib import Path

from pydantic import SecretStr

from tests.support.api import app_client

FIXTURE = Path(__file__).parent / "fixtures" / "letta-0.16.8-sample.af"
ADMIN = {"Authorization": "Bearer admin-key"}


async def key_of(client, organization: str) -> dict[str, str]:
    created = await client.post("/v1/admin/api-keys", json={"organization": organization}, headers=ADMIN)
    return {"Authorization": f"Bearer {created.json()['key']}"}


async def test_imports_and_exports_are_scoped_to_the_organization(settings, llm):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr("admin-key")})) as client:
        a, b = await key_of(client, "a"), await key_of(client, "b")
        planted = await client.post(
            "/v1/tools/", json={"source_code": "def word_count(text: str) -> int:\n    return 42"}, headers=a
        )
        upload = {"file": ("sample.af", FIXTURE.read_bytes(), "application/json")}

        imported = await client.post("/v1/agents/import", files=upload, headers=b)
        [agent_id] = imported.json()["agent_ids"]
        b_tools = (await client.get(f"/v1/agents/{agent_id}/tools", headers=b)).json()
        exported_by_a = await client.get(f"/v1/agents/{agent_id}/export", headers=a)
        exported_by_b = await client.get(f"/v1/agents/{agent_id}/export", headers=b)
        unauthenticated = await client.post("/v1/agents/import", files=upload)

    assert planted.status_code == 200 and imported.status_code == 200, imported.text
    word_count = next(tool for tool in b_tools if tool["name"] == "word_count")
    assert word_count["id"] != planted.json()["id"] and "return 42" not in word_count["source_code"]
    assert exported_by_a.status_code == 404 and exported_by_b.status_code == 200
    assert unauthenticated.status_code == 401
