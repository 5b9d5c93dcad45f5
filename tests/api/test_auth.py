"""Keys: how they are presented, refused, revoked and recorded; the admin API; local mode."""

import pytest
from pydantic import SecretStr

from tests.support.api import app_client

ADMIN_KEY = "admin-secret-for-tests"


@pytest.fixture
async def server(settings):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY)})) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def new_key(client, organization: str, name: str = "") -> dict:
    created = await client.post(
        "/v1/admin/api-keys", json={"organization": organization, "name": name}, headers=bearer(ADMIN_KEY)
    )
    assert created.status_code == 200, created.text
    return created.json()


async def test_missing_unknown_and_revoked_keys_get_401_with_bearer_challenge(server):
    key = await new_key(server, "acme")
    ok = await server.get("/v1/agents/", headers=bearer(key["key"]))
    revoked = await server.delete(f"/v1/admin/api-keys/{key['id']}", headers=bearer(ADMIN_KEY))
    after = await server.get("/v1/agents/", headers=bearer(key["key"]))
    missing = await server.get("/v1/agents/")
    unknown = await server.get("/v1/agents/", headers=bearer("mvk_" + "x" * 43))
    not_ascii = await server.get("/v1/agents/", headers={"Authorization": b"Bearer \xe9t\xe9"})

    assert ok.status_code == 200 and revoked.status_code == 204
    for refused in (after, missing, unknown, not_ascii):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer" and refused.headers["x-should-retry"] == "false"
    assert "revoked" in after.json()["detail"] and "Authorization: Bearer" in missing.json()["detail"]
    assert (await server.get("/v1/health/")).status_code == 200


async def test_letta_bare_password_header_is_accepted(server):
    key = await new_key(server, "acme")

    response = await server.get("/v1/agents/", headers={"X-BARE-PASSWORD": f"password {key['key']}"})

    assert response.status_code == 200


async def test_admin_api_shows_keys_without_secrets_and_refuses_organization_keys(server):
    key = await new_key(server, "acme", name="ci")
    await new_key(server, "acme")

    listed = (await server.get("/v1/admin/api-keys", headers=bearer(ADMIN_KEY))).json()
    organizations = (await server.get("/v1/admin/organizations", headers=bearer(ADMIN_KEY))).json()
    forbidden = await server.get("/v1/admin/api-keys", headers=bearer(key["key"]))
    unknown = await server.delete("/v1/admin/api-keys/apikey-00000000-0000-4000-8000-000000000000", headers=bearer(ADMIN_KEY))

    assert key["key"].startswith("mvk_") and len(key["key"]) > 40 and key["organization"] == "acme"
    assert [k["organization"] for k in listed] == ["acme", "acme"] and listed[0]["name"] == "ci"
    assert all("key" not in k for k in listed) and key["key"] not in str(listed)
    assert listed[0]["prefix"] == key["key"][:12]
    assert sorted(o["name"] for o in organizations) == ["acme", "default"]
    assert forbidden.status_code == 403 and unknown.status_code == 404


async def test_writes_record_the_key_that_made_them(server, db):
    key = await new_key(server, "acme")
    block = (await server.post("/v1/blocks/", json={"label": "team", "value": "a"}, headers=bearer(key["key"]))).json()
    await server.patch(f"/v1/blocks/{block['id']}", json={"value": "b"}, headers=bearer(ADMIN_KEY))

    changes = await db.fetch("SELECT actor_type, actor_id FROM block_change WHERE block_id = $1 ORDER BY id", block["id"])
    organization = await db.fetchval("SELECT organization_id FROM block WHERE id = $1", block["id"])

    # The admin key acts in the default organization: it cannot see acme's block at all.
    assert [tuple(c) for c in changes] == [("api_key", key["id"])]
    assert organization == (await db.fetchval("SELECT id FROM organization WHERE name = 'acme'"))


async def test_local_mode_turns_into_authenticated_mode_when_a_key_is_created(settings):
    async with app_client(settings) as local:
        before = await local.get("/v1/agents/")
        created = await local.post("/v1/admin/api-keys", json={"organization": "acme"})
        after = await local.get("/v1/agents/")
        with_key = await local.get("/v1/agents/", headers=bearer(created.json()["key"]))

    assert before.status_code == 200 and created.status_code == 200
    assert after.status_code == 401 and with_key.status_code == 200


async def test_oversized_bodies_get_413_and_store_nothing(settings):
    async with app_client(settings.model_copy(update={"max_request_bytes": 2048})) as client:
        too_big = await client.post("/v1/blocks/", json={"label": "x", "value": "y" * 5000})
        chunked = await client.post("/v1/blocks/", content=_chunks(b"x" * 1024, 4), headers={"content-type": "application/json"})
        counted = (await client.get("/v1/blocks/")).json()

    assert too_big.status_code == 413 and "2048 bytes" in too_big.json()["detail"]
    assert chunked.status_code == 413
    assert counted == []


async def _chunks(piece: bytes, count: int):
    """A body without Content-Length (chunked): the cap must stop it while it is read."""
    for _ in range(count):
        yield piece


async def test_organization_names_and_key_labels_with_control_characters_are_a_422(server):
    keys_before = (await server.get("/v1/admin/api-keys", headers=bearer(ADMIN_KEY))).json()
    organizations_before = (await server.get("/v1/admin/organizations", headers=bearer(ADMIN_KEY))).json()

    for organization in ("acme\x1b[2J", "ac\rme", "acme\nroot", "\u202eacme", " acme", "acme ", "a" * 101, "", "a/b"):
        response = await server.post("/v1/admin/api-keys", json={"organization": organization}, headers=bearer(ADMIN_KEY))
        assert response.status_code == 422, (organization, response.text)
        assert response.json()["detail"].startswith("Invalid request: body.organization: "), response.text
    for label in ("ci\r\nrevoked", "a\x1b[31m", "\t", "x" * 201):
        body = {"organization": "acme", "name": label}
        response = await server.post("/v1/admin/api-keys", json=body, headers=bearer(ADMIN_KEY))
        assert response.status_code == 422, (label, response.text)
        assert response.json()["detail"].startswith("Invalid request: body.name: "), response.text

    assert (await server.get("/v1/admin/api-keys", headers=bearer(ADMIN_KEY))).json() == keys_before
    assert (await server.get("/v1/admin/organizations", headers=bearer(ADMIN_KEY))).json() == organizations_before
    for organization in ("Acme Corp", "société-1.io", "a_b", "x" * 100):
        assert (await new_key(server, organization, name="CI runner #2 (ünïcode)"))["organization"] == organization
