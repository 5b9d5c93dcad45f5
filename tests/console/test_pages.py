"""The console's pages over HTTP: sign-in, the agent list, block edits with their version check,
the prompt views, history with undo and restore, and the guards (cross-site forms, isolation)."""

import hashlib
import re
from html import unescape
from pathlib import Path

import pytest

import memvm.api.console
from tests.support.api import app_client, create_agent
from tests.support.console import form_headers, sign_in


async def save(client, agent: dict, block: dict, token: str, value: str, version: int):
    """The block card's Save, as htmx sends it."""
    data = {"value": value, "version": str(version)}
    return await client.post(f"/ui/agents/{agent['id']}/blocks/{block['id']}", data=data, headers=form_headers(token))


async def block_of(client, agent_id: str, label: str) -> dict:
    response = await client.get(f"/v1/agents/{agent_id}/core-memory/blocks/{label}")
    assert response.status_code == 200, response.text
    return response.json()


async def test_local_mode_signs_in_without_a_key_and_lists_agents_with_search(client):
    await create_agent(client, name="tea-lover", tags=["support"])
    await create_agent(client, name="coffee-fan")

    before = await client.get("/ui/agents")
    token = await sign_in(client)
    everyone = await client.get("/ui/agents")
    by_name = await client.get("/ui/agents", params={"q": "TEA"})
    by_tag = await client.get("/ui/agents", params={"tag": "support"})

    assert before.status_code == 303 and before.headers["location"] == "/ui/sign-in"
    assert len(token) == 64
    assert "tea-lover" in everyone.text and "coffee-fan" in everyone.text
    assert "tea-lover" in by_name.text and "coffee-fan" not in by_name.text
    assert "tea-lover" in by_tag.text and "coffee-fan" not in by_tag.text


async def test_the_agent_list_pages_newest_first(client):
    for number in range(27):
        await create_agent(client, name=f"agent-{number:02d}", memory_blocks=[])
    await sign_in(client)

    first = await client.get("/ui/agents")
    older = re.search(r'href="(/ui/agents\?[^"]*after=[^"]+)"', first.text)
    second = await client.get(unescape(older.group(1)))
    newer = re.search(r'href="(/ui/agents\?[^"]*before=[^"]+)"', second.text)
    back = await client.get(unescape(newer.group(1)))

    names = lambda page: re.findall(r">(agent-\d\d)</a>", page.text)  # noqa: E731
    assert names(first) == [f"agent-{n:02d}" for n in range(26, 1, -1)]
    assert names(second) == ["agent-01", "agent-00"]
    assert names(back) == names(first)
    assert "after=" not in second.text and "before=" not in first.text


async def test_an_edit_saves_with_the_version_it_started_from_and_shows_in_every_prompt_view(client):
    agent = await create_agent(client)
    human = await block_of(client, agent["id"], "human")
    token = await sign_in(client)

    saved = await save(client, agent, human, token, "Name: Bob\r\nLikes: green tea", 1)
    views = {
        mode: await client.get(f"/ui/agents/{agent['id']}/prompt", params={"mode": mode})
        for mode in ("standard", "line_numbered", "git")
    }

    assert saved.status_code == 200, saved.text
    assert saved.headers["hx-trigger"] == "memory-changed"
    assert re.search(r"26 / \d+ characters</span> · version <span class=\"version\">2<", saved.text), saved.text
    assert (await block_of(client, agent["id"], "human"))["value"] == "Name: Bob\nLikes: green tea"
    assert "Likes: green tea" in views["standard"].text and "&lt;memory_metadata&gt;" in views["standard"].text
    assert "2→ Likes: green tea" in unescape(views["line_numbered"].text)
    assert "<projection>" in unescape(views["git"].text)
    assert {mode: view.text.count('aria-pressed="true"') for mode, view in views.items()} == dict.fromkeys(views, 1)


async def test_a_stale_version_is_a_conflict_showing_both_values_and_changes_nothing(client):
    agent = await create_agent(client)
    human = await block_of(client, agent["id"], "human")
    token = await sign_in(client)
    meanwhile = await client.patch(f"/v1/blocks/{human['id']}", json={"value": "Name: Robert"})

    stale = await save(client, agent, human, token, "Name: Bobby", 1)
    after_conflict = await block_of(client, agent["id"], "human")
    resolved = await save(client, agent, human, token, "Name: Bobby", 2)

    assert meanwhile.status_code == 200
    assert stale.status_code == 412
    assert "Conflict" in stale.text and "Name: Robert" in stale.text and "Name: Bobby" in stale.text
    assert 'name="version" value="2"' in stale.text  # saving from the conflict view overwrites version 2 knowingly
    assert after_conflict["value"] == "Name: Robert" and after_conflict["version"] == 2
    assert resolved.status_code == 200 and (await block_of(client, agent["id"], "human"))["value"] == "Name: Bobby"


async def test_an_edit_over_the_limit_is_refused_with_the_numbers_and_keeps_the_draft(client):
    agent = await create_agent(client, memory_blocks=[{"label": "human", "value": "Bob", "limit": 10}])
    human = await block_of(client, agent["id"], "human")
    token = await sign_in(client)

    refused = await save(client, agent, human, token, "Robert the Bruce", 1)

    assert refused.status_code == 422
    assert "16" in refused.text and "10" in refused.text and "Not saved" in refused.text
    assert ">Robert the Bruce</textarea>" in refused.text
    assert (await block_of(client, agent["id"], "human"))["value"] == "Bob"


async def test_history_shows_who_changed_what_and_undo_and_restore_make_new_versions(client):
    agent = await create_agent(client)
    human = await block_of(client, agent["id"], "human")
    token = await sign_in(client)
    url = f"/ui/agents/{agent['id']}/blocks/{human['id']}"
    await client.post(url, data={"value": "Name: Robert", "version": "1"}, headers=form_headers(token))

    history = await client.get(f"{url}/history")
    undone = await client.post(f"{url}/undo", data={"version": "2"}, headers=form_headers(token))
    after_undo = await block_of(client, agent["id"], "human")
    stale_redo = await client.post(f"{url}/redo", data={"version": "2"}, headers=form_headers(token))
    restored = await client.post(f"{url}/restore", data={"version": "3", "restore_version": "2"}, headers=form_headers(token))
    after_restore = await block_of(client, agent["id"], "human")

    assert history.status_code == 200
    assert "Version 2: update" in history.text and "Version 1: create" in history.text
    assert "by\n      local" in history.text or "local." in history.text
    assert "Name: Bob" in history.text and "Name: Robert" in history.text and ">changed<" in history.text
    assert undone.status_code == 204 and undone.headers["hx-refresh"] == "true"
    assert after_undo["value"] == "Name: Bob" and after_undo["version"] == 3
    assert stale_redo.status_code == 412 and stale_redo.headers["hx-retarget"] == "#flash"
    assert restored.status_code == 204
    assert after_restore["value"] == "Name: Robert" and after_restore["version"] == 4


async def test_forms_without_the_token_or_from_another_site_are_refused(client):
    agent = await create_agent(client)
    human = await block_of(client, agent["id"], "human")
    token = await sign_in(client)
    url = f"/ui/agents/{agent['id']}/blocks/{human['id']}"

    no_token = await client.post(url, data={"value": "x", "version": "1"})
    wrong_token = await client.post(url, data={"value": "x", "version": "1", "csrf_token": "0" * 64})
    other_site = await client.post(
        url, data={"value": "x", "version": "1"}, headers={**form_headers(token), "Origin": "https://evil.example"}
    )
    form_field = await client.post(url, data={"value": "ok", "version": "1", "csrf_token": token})

    for refused in (no_token, wrong_token, other_site):
        assert refused.status_code == 403, refused.text
    assert form_field.status_code == 200
    assert (await block_of(client, agent["id"], "human"))["version"] == 2


async def test_pages_forbid_inline_scripts_and_carry_no_inline_code(client):
    agent = await create_agent(client)
    await sign_in(client)

    page = await client.get(f"/ui/agents/{agent['id']}")
    script = await client.get("/ui/static/htmx.min.js")

    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    assert re.findall(r"<script(?![^>]*\bsrc=)", page.text) == []
    assert re.findall(r"\s(?:on[a-z]+|style)=", page.text) == []
    assert script.status_code == 200 and "htmx" in script.text[:200]
    assert "Core memory" in page.text and "Compiled system prompt" in page.text and "Context window" in page.text


@pytest.fixture
async def keyed(settings):
    from pydantic import SecretStr

    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr("console-admin")})) as client:
        yield client


async def new_key(client, organization: str) -> dict:
    created = await client.post(
        "/v1/admin/api-keys", json={"organization": organization}, headers={"Authorization": "Bearer console-admin"}
    )
    assert created.status_code == 200, created.text
    return created.json()


async def test_with_keys_the_console_needs_one_and_shows_only_its_organization(keyed):
    acme, globex = await new_key(keyed, "acme"), await new_key(keyed, "globex")
    created = await keyed.post(
        "/v1/agents/",
        json={"name": "acme-agent", "memory_blocks": [{"label": "human", "value": "x"}]},
        headers={"Authorization": f"Bearer {acme['key']}"},
    )
    agent_id = created.json()["id"]

    anonymous = await keyed.get("/ui/agents")
    wrong = await keyed.post("/ui/sign-in", data={"key": "mvk_" + "x" * 43})
    await sign_in(keyed, globex["key"])
    globex_list = await keyed.get("/ui/agents")
    globex_page = await keyed.get(f"/ui/agents/{agent_id}")
    await sign_in(keyed, acme["key"])
    acme_list = await keyed.get("/ui/agents")
    revoked = await keyed.delete(f"/v1/admin/api-keys/{acme['id']}", headers={"Authorization": "Bearer console-admin"})
    after_revoke = await keyed.get("/ui/agents")

    assert anonymous.status_code == 303
    assert wrong.status_code == 401 and "unknown or has been revoked" in wrong.text
    assert "acme-agent" not in globex_list.text
    assert globex_page.status_code == 404 and "acme-agent" not in globex_page.text
    assert "acme-agent" in acme_list.text
    assert revoked.status_code == 204 and after_revoke.status_code == 303


async def test_the_console_can_be_turned_off(settings):
    async with app_client(settings.model_copy(update={"ui": False})) as client:
        assert (await client.get("/ui/agents")).status_code == 404
        assert (await client.get("/ui/static/htmx.min.js")).status_code == 404


def test_the_vendored_scripts_are_the_npm_files_recorded_with_their_licences():
    static = Path(memvm.api.console.__file__).parent / "static"
    row = re.compile(r"\| `([\w.-]+\.js)` \| .*? \| `([\w.-]+\.LICENSE)` .*? \| `([0-9a-f]{64})` \|")
    recorded = row.findall((static / "VENDORED.md").read_text())

    assert {name for name, _, _ in recorded} == {path.name for path in static.glob("*.min.js")}
    for name, licence, checksum in recorded:
        assert hashlib.sha256((static / name).read_bytes()).hexdigest() == checksum, name
        assert "Permission to use, copy, modify" in (static / licence).read_text()


async def test_text_postgresql_cannot_store_is_refused_with_a_message_and_nothing_changes(client):
    agent = await create_agent(client)
    human = await block_of(client, agent["id"], "human")
    token = await sign_in(client)

    nul = await client.post(
        f"/ui/agents/{agent['id']}/blocks/{human['id']}", data={"value": "Bob\x00", "version": "1"}, headers=form_headers(token)
    )
    in_query = await client.get("/ui/agents", params={"q": "a\x00b"})

    assert nul.status_code == 422 and "NUL character" in nul.text and "form.value" in nul.text
    assert in_query.status_code == 422 and "NUL character" in in_query.text
    assert (await block_of(client, agent["id"], "human"))["version"] == 1
