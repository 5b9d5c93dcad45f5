"""Every console route that names an object, walked with organization B's session against
organization A's ids: each is a 404 and changes nothing. The routes are read from the app, so a new
console route is walked too (and one with a path parameter this test does not know fails it)."""

import re

import pytest
from pydantic import SecretStr

from memvm.api.console import ROUTERS
from memvm.api.console.session import ConsoleRoute
from tests.support.api import app_client, table_counts
from tests.support.console import form_headers, sign_in

ADMIN = {"Authorization": "Bearer isolation-admin"}
# Everything any console form sends; each route reads the fields it needs.
FORM = {
    "value": "overwritten by B",
    "version": "1",
    "restore_version": "1",
    "text": "from B",
    "tags": "b",
    "tool_call_id": "call_1",
    "decision": "approve",
    "reason": "",
}


@pytest.fixture
async def keyed(settings):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr("isolation-admin")})) as client:
        yield client


async def organization_key(client, name: str) -> str:
    created = await client.post("/v1/admin/api-keys", json={"organization": name}, headers=ADMIN)
    assert created.status_code == 200, created.text
    return created.json()["key"]


async def objects_of_a(client, key: str, llm) -> dict[str, str]:
    as_a = {"Authorization": f"Bearer {key}"}
    agent = (
        await client.post(
            "/v1/agents/",
            json={"model": "openai/scripted-model", "memory_blocks": [{"label": "human", "value": "A's secret"}]},
            headers=as_a,
        )
    ).json()
    llm.reply("hello")
    sent = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"}, headers=as_a)
    passage = await client.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": "A's note"}, headers=as_a)
    tools = (await client.get(f"/v1/agents/{agent['id']}/tools", headers=as_a)).json()
    assert sent.status_code == 200 and passage.status_code == 200
    return {
        "agent_id": agent["id"],
        "block_id": agent["blocks"][0]["id"],
        "run_id": sent.json()["messages"][0]["run_id"],
        "passage_id": passage.json()[0]["id"],
        "tool_id": tools[0]["id"],
        "direction": "undo",
    }


def console_routes() -> list[tuple[str, str]]:
    return [
        (method, route.path)
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, ConsoleRoute) and "{" in route.path
        for method in sorted(route.methods)
    ]


async def test_every_console_route_hides_another_organizations_objects(keyed, llm, db):
    key_a, key_b = await organization_key(keyed, "org-a"), await organization_key(keyed, "org-b")
    ids = await objects_of_a(keyed, key_a, llm)
    token = await sign_in(keyed, key_b)
    before = await table_counts(db)
    walked = []

    for method, path in console_routes():
        names = re.findall(r"{(\w+)}", path)
        unknown = [name for name in names if name not in ids]
        assert not unknown, f"{path}: add an id of organization A for {unknown} to this test"
        url = path.format(**{name: ids[name] for name in names})
        if method == "GET":
            response = await keyed.get(url, params={"query": "note"})
        else:
            response = await keyed.request(method, url, data={**FORM, "tool_id": ids["tool_id"]}, headers=form_headers(token))
        assert response.status_code == 404, f"{method} {path}: {response.status_code} {response.text[:300]}"
        assert "A's secret" not in response.text and "A's note" not in response.text
        walked.append(f"{method} {path}")

    assert len(walked) >= 17, walked
    assert await table_counts(db) == before
    block = await keyed.get(f"/v1/blocks/{ids['block_id']}", headers={"Authorization": f"Bearer {key_a}"})
    assert block.json()["value"] == "A's secret" and block.json()["version"] == 1
