"""The console's archival memory (insert, search with filters and scores, delete) and tools
(attach, detach, schema and rules) panels, through the same services as the REST routes."""

import re
from datetime import UTC, datetime, timedelta

from tests.support.api import create_agent
from tests.support.console import form_headers, sign_in


async def test_passages_are_inserted_searched_with_filters_and_scores_and_deleted(client):
    agent = await create_agent(client)
    token = await sign_in(client)
    url = f"/ui/agents/{agent['id']}/archival"
    for text, tags in (("Bob's sister lives in Oslo.", "family"), ("Bob drinks green tea every morning.", "habits, food")):
        inserted = await client.post(url, data={"text": text, "tags": tags}, headers=form_headers(token))
        assert inserted.status_code == 200 and "Stored passage passage-" in inserted.text

    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    by_meaning = await client.get(url, params={"query": "where does his sister live", "top_k": "1"})
    by_tag = await client.get(url, params={"query": "sister", "tags": "habits"})
    in_future = await client.get(url, params={"query": "sister", "start": tomorrow})
    passage_id = re.search(r"/archival/(passage-[^/]+)/delete", by_meaning.text).group(1)
    deleted = await client.post(f"{url}/{passage_id}/delete", headers=form_headers(token))
    stored = await client.get(f"/v1/agents/{agent['id']}/archival-memory")

    results = by_meaning.text.split("Newest passages")[0]
    assert "1 result(s)" in results and "Oslo" in results and "green tea" not in results
    assert re.search(r"<td>0\.\d{3}</td>", results)
    assert "green tea" in by_tag.text.split("Newest passages")[0] and "Oslo" not in by_tag.text.split("Newest passages")[0]
    assert "0 result(s)" in in_future.text
    assert deleted.status_code == 200 and f"Deleted passage {passage_id}" in deleted.text
    assert [p["text"] for p in stored.json()] == ["Bob drinks green tea every morning."]


async def test_an_empty_or_oversized_passage_is_refused_with_a_message(client):
    agent = await create_agent(client)
    token = await sign_in(client)

    too_long = await client.post(f"/ui/agents/{agent['id']}/archival", data={"text": "x" * 10_001}, headers=form_headers(token))
    bad_date = await client.get(f"/ui/agents/{agent['id']}/archival", params={"query": "q", "start": "not-a-date"})

    assert too_long.status_code == 400 and "10000" in too_long.text
    assert bad_date.status_code == 400 and "start_datetime" in bad_date.text
    assert (await client.get(f"/v1/agents/{agent['id']}/archival-memory")).json() == []


async def test_tools_are_attached_and_detached_with_their_schemas_and_rules(client):
    agent = await create_agent(client, tool_rules=[{"type": "exit_loop", "tool_name": "memory_insert"}])
    token = await sign_in(client)
    search = (await client.get("/v1/tools/", params={"name": "archival_memory_search"})).json()[0]

    panel = await client.get(f"/ui/agents/{agent['id']}/tools")
    attached = await client.post(
        f"/ui/agents/{agent['id']}/tools/attach", data={"tool_id": search["id"]}, headers=form_headers(token)
    )
    names_after_attach = [t["name"] for t in (await client.get(f"/v1/agents/{agent['id']}/tools")).json()]
    detached = await client.post(f"/ui/agents/{agent['id']}/tools/{search['id']}/detach", headers=form_headers(token))
    names_after_detach = [t["name"] for t in (await client.get(f"/v1/agents/{agent['id']}/tools")).json()]

    assert "<code>memory_insert</code>" in panel.text and "exit_loop" in panel.text
    assert '"new_string"' in panel.text or "&#34;new_string&#34;" in panel.text  # the JSON schema
    assert f'<option value="{search["id"]}">archival_memory_search</option>' in panel.text
    assert attached.status_code == 200 and "Detach archival_memory_search" in attached.text
    assert "archival_memory_search" in names_after_attach
    assert detached.status_code == 200 and "archival_memory_search" not in names_after_detach
