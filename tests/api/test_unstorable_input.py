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


# Python's json reads NaN and ±Infinity, and turns a number past the float range into inf; PostgreSQL's
# json and jsonb refuse all three (`Token "NaN" is invalid`).
NON_FINITE = {"NaN": "NaN", "Infinity": "-Infinity", "1e400": "1e400", "400 digits": "1" + "0" * 400 + ".5"}


async def test_non_finite_numbers_in_a_json_body_are_a_422_naming_the_field(client, db):
    agent = await create_agent(client)
    block = await create_block(client)
    archive = (await client.post("/v1/archives/", json={"name": "garden"})).json()
    before = await table_counts(db)
    archives = await db.fetchval("SELECT count(*) FROM archive")
    # (method, path, body with NUMBER where the number goes, the field the answer must name)
    routes = [
        ("POST", "/v1/blocks/", '{"label": "x", "metadata": {"k": NUMBER}}', "body.metadata.k"),
        ("PATCH", f"/v1/blocks/{block['id']}", '{"metadata": {"k": [1, NUMBER]}}', "body.metadata.k.1"),
        ("POST", "/v1/agents/", '{"name": "n", "metadata": {"k": NUMBER}}', "body.metadata.k"),
        ("PATCH", f"/v1/agents/{agent['id']}", '{"llm_config": {"model": "m", "top_p": NUMBER}}', "body.llm_config.top_p"),
        (
            "PATCH",
            f"/v1/agents/{agent['id']}",
            '{"tool_rules": [{"type": "run_first", "tool_name": "memory_insert", "args": {"n": NUMBER}}]}',
            "body.tool_rules.0.args.n",
        ),
        ("POST", "/v1/archives/", '{"name": "a", "metadata": {"k": NUMBER}}', "body.metadata.k"),
        (
            "POST",
            f"/v1/archives/{archive['id']}/passages/batch",
            '{"passages": [{"text": "t", "metadata": {"k": NUMBER}}]}',
            "body.passages.0.metadata.k",
        ),
        ("POST", "/v1/tools/", '{"source_code": "def f():\\n    pass", "json_schema": {"x": NUMBER}}', "body.json_schema.x"),
    ]
    for name, number in NON_FINITE.items():
        for method, path, body, field in routes:
            content = body.replace("NUMBER", number)
            response = await client.request(method, path, content=content, headers={"content-type": "application/json"})
            assert response.status_code == 422, (name, method, path, response.status_code, response.text)
            assert f"{field}: the number is not finite" in response.json()["detail"], (name, response.text)
    assert await table_counts(db) == before
    assert await db.fetchval("SELECT count(*) FROM archive") == archives
    assert (await client.get(f"/v1/blocks/{block['id']}")).json()["metadata"] == block["metadata"]


async def test_finite_numbers_at_the_ends_of_the_range_are_stored(client):
    metadata = {"big": -1.7976931348623157e308, "tiny": 1e-320, "int": 10**300, "text": "NaN Infinity 1e400"}

    block = await create_block(client, metadata=metadata)

    stored = (await client.get(f"/v1/blocks/{block['id']}")).json()["metadata"]
    # jsonb keeps numbers as numeric, and -1.79…e308 comes back written out in full (an int)
    assert {**stored, "big": float(stored["big"])} == metadata
