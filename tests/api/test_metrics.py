"""GET /metrics: the counters move with the work (requests by route template, turns, steps, model
calls and tokens, tool calls, block writes and refusals, searches, turn-lock waits), and only the
admin may read them."""

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from tests.support.api import app_client, create_agent
from tests.support.metrics import samples, value

MODEL = {"model": "openai/scripted-model"}


async def test_the_counters_move_with_the_work(client, llm):
    before = samples((await client.get("/metrics")).text)
    agent = await create_agent(client, **MODEL, memory_blocks=[{"label": "human", "value": "Bob", "limit": 20}])
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})], usage=(100, 7)).reply("Noted.")
    await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "I like tea"})
    block = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    over = await client.patch(f"/v1/blocks/{block['id']}", json={"value": "x" * 50})
    stale = await client.patch(f"/v1/blocks/{block['id']}", json={"value": "Bob"}, headers={"If-Match": '"1"'})
    await client.post("/v1/agents/messages/search", json={"query": "tea", "agent_id": agent["id"], "search_mode": "fts"})
    scraped = await client.get("/metrics")
    after = samples(scraped.text)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert scraped.headers["content-type"].startswith("text/plain") and over.status_code == 422 and stale.status_code == 412
    route = "/v1/agents/{agent_id}/messages"
    assert moved("memvm_http_requests_total", method="POST", route=route, status="200") == 1
    assert moved("memvm_http_request_seconds_count", method="POST", route=route) == 1
    assert moved("memvm_turns_total", stop_reason="end_turn") == 1
    assert moved("memvm_steps_total", status="success") == 2
    assert moved("memvm_model_call_seconds_count", model="openai/scripted-model") == 2
    assert moved("memvm_model_tokens_total", model="openai/scripted-model", kind="prompt") >= 100
    assert moved("memvm_tool_calls_total", tool="memory_insert", status="success") == 1
    assert moved("memvm_block_writes_total", result="written") == 1
    assert moved("memvm_block_writes_total", result="refused_invalid") == 1
    assert moved("memvm_block_writes_total", result="refused_version") == 1
    assert moved("memvm_search_seconds_count", kind="conversation") == 1
    assert moved("memvm_turn_lock_wait_seconds_count") == 1
    assert value(after, "memvm_db_pool_connections", state="idle") >= 1  # the connections the work used


async def test_only_the_admin_reads_them(settings, llm):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr("admin-key")})) as client:
        created = await client.post(
            "/v1/admin/api-keys", json={"organization": "acme"}, headers={"Authorization": "Bearer admin-key"}
        )
        as_org = await client.get("/metrics", headers={"Authorization": f"Bearer {created.json()['key']}"})
        anonymous = await client.get("/metrics")
        as_admin = await client.get("/metrics", headers={"Authorization": "Bearer admin-key"})

    assert as_org.status_code == 403 and anonymous.status_code == 401 and as_admin.status_code == 200


async def test_the_grafana_dashboard_only_uses_metrics_memvm_exposes(client):
    exposed = {family.name for family in text_string_to_metric_families((await client.get("/metrics")).text)}
    dashboard = json.loads((Path(__file__).parents[2] / "examples" / "grafana-dashboard.json").read_text())

    used = {
        name for panel in dashboard["panels"] for target in panel["targets"] for name in re.findall(r"memvm_\w+", target["expr"])
    }
    unknown = {name for name in used if re.sub(r"_(bucket|count|sum|total)$", "", name) not in exposed}

    assert len(used) >= 12 and unknown == set()
