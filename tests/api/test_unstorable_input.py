"""Input PostgreSQL cannot store (api/storable.py) is a 422 that names where it is, and changes nothing.
Each case is one Schemathesis found as a 500 (tests/fuzz/test_schemathesis.py): the value reached the
database, which refused it."""

from pydantic import SecretStr

from tests.support.api import app_client, create_agent, create_block, table_counts

ADMIN_KEY = "admin-secret-for-tests"


async def test_nul_characters_anywhere_are_a_422_naming_the_field(settings, db):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY)})) as client:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        archive = (await client.post("/v1/archives/", json={"name": "garden"}, headers=admin)).json()
        before = await table_counts(db)
        organizations = (await client.get("/v1/admin/organizations", headers=admin)).json()

        found = {
            "query.label": client.get("/v1/blocks/", params={"label": "a\x00"}, headers=admin),
            "query.name": client.get("/v1/tools/count", params={"name": "\x00"}, headers=admin),
            "body.organization": client.post("/v1/admin/api-keys", json={"organization": "a\x00"}, headers=admin),
            "body.passages.0.text": client.post(
                f"/v1/archives/{archive['id']}/passages/batch", json={"passages": [{"text": "\x00"}]}, headers=admin
            ),
            # jsonb refuses \u0000 too ("unsupported Unicode escape sequence")
            "body.metadata.k": client.post("/v1/blocks/", json={"label": "x", "metadata": {"k": "\x00"}}, headers=admin),
        }
        for field, request in found.items():
            response = await request
            assert response.status_code == 422, (field, response.text)
            assert response.json()["detail"].startswith(f"Invalid request: {field}: the text contains a NUL character")
        assert await table_counts(db) == before
        assert (await client.get("/v1/admin/organizations", headers=admin)).json() == organizations


async def test_a_nul_in_a_message_is_refused_before_the_model_is_called(client, llm):
    agent = await create_agent(client)

    response = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi\x00"})

    assert response.status_code == 422
    assert "body.input: the text contains a NUL character" in response.json()["detail"]
    assert llm.requests == []


async def test_json_nested_past_the_limit_is_a_422_and_within_it_is_stored(client):
    block = await create_block(client)
    deep = '{"a": ' * 100 + "1" + "}" * 100  # with the body's own object: 101 levels

    refused = await client.patch(
        f"/v1/blocks/{block['id']}", content=f'{{"metadata": {deep}}}', headers={"content-type": "application/json"}
    )
    kept = await client.patch(f"/v1/blocks/{block['id']}", json={"metadata": {"a": {"b": [1, {"c": "\\u0000"}]}}})

    assert refused.status_code == 422
    assert "nested deeper than 100 levels" in refused.json()["detail"]
    assert kept.status_code == 200
    assert kept.json()["metadata"] == {"a": {"b": [1, {"c": "\\u0000"}]}}  # an escaped backslash is ordinary text
