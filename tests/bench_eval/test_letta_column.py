"""The Letta side of the LoCoMo harness, without Letta: the report's Letta column from hand-made
results, Letta's tool returns read back to dia_ids, and the embedding config Letta's agents get."""

import json

import httpx
import pytest
from bench.eval.data import conversation_of
from bench.eval.evaluate import Evaluation, describe
from bench.eval.letta import letta_settings
from bench.eval.methods import Target, archival_turns, conversation_search
from bench.eval.report import markdown, write
from bench.eval.run import arguments, build_report, letta_report
from bench.eval.scoring import Outcome

from tests.bench_eval.tiny import TINY, tiny


def hand_made(tmp_path, methods, recalls, lost):
    """One evaluation of the tiny conversation whose every question got `recalls[method]` at k 5 and 10."""
    conversation = conversation_of(tiny(tmp_path), TINY)
    evaluation = Evaluation(methods, (5, 10))
    evaluation.outcomes["tiny"] = {
        m: {k: [Outcome(q.category, recalls[m], recalls[m] == 1.0, 20.0, 50.0) for q in conversation.scored] for k in (5, 10)}
        for m in methods
    }
    evaluation.conversations["tiny"] = describe(conversation) | {
        "ingest_seconds": {"import_history": 1.0},
        "query_seconds": 2.0,
        "lost_turns": lost,
        "clipped_tool_returns": {},
        "results": evaluation.results(["tiny"]),
    }
    return evaluation


def test_the_report_puts_a_letta_column_beside_each_memvm_column(tmp_path):
    memvm = hand_made(tmp_path, ["conversation_search", "messages_fts"], {"conversation_search": 1.0, "messages_fts": 0.5}, [])
    letta = hand_made(tmp_path, ["conversation_search"], {"conversation_search": 0.0}, ["D2:4"])
    report = build_report(memvm, tmp_path, {"memvm_version": "1", "embedding_model": "m", "load_average": ["1.00"]}, 1.0)
    alone = markdown(report)
    assert "| method | R@5 | R@10 | all@10 |" in alone and "Letta" not in alone

    facts = {"letta_version": "0.16.8", "load_average": ["2.00", "3.00"], "embedding_config": {"embedding_model": "m"}}
    facts["embedding_config"] |= {"embedding_dim": 384, "embedding_endpoint": "http://127.0.0.1:1/v1"}
    report["letta"] = letta_report(letta, facts, ["conversation_search", "messages_fts"])
    out = tmp_path / "out"
    written = write(report, out)
    text = (out / "eval.md").read_text()
    assert "| method | R@5 memvm | R@5 Letta | R@10 memvm | R@10 Letta | all@10 memvm | all@10 Letta |" in text
    assert "| `conversation_search` | 1.000 | 0.000 | 1.000 | 0.000 | 1.000 | 0.000 | 20.0 | 20.0 |" in text
    assert "| `messages_fts` | 0.500 | n/a | 0.500 | n/a |" in text  # Letta has no such route: no number
    assert "cloud-only" in text and "ILIKE" in text  # why, and how Letta's conversation_search searches
    assert "| tiny.json | 8 | 2 | 3 | 1 | 1.0 | 2.0 | 0 | 1.0 | 2.0 | 1 |" in text  # lost turns: memvm 0, Letta 1
    assert "Letta did not list back 1 turns: ['D2:4']" in text
    saved = json.loads((out / "eval.json").read_text())
    assert saved["letta"]["groups"]["all"]["results"]["conversation_search"]["10"]["recall"] == 0.0
    assert saved["letta"]["not_available"].keys() == {"messages_fts"}
    if saved["plot_note"]:
        pytest.skip(saved["plot_note"])
    assert out / "eval.png" in written and (out / "eval.png").stat().st_size > 1000


def letta_like(returns):
    """A transport answering the tools' run route as Letta 0.16.8 does: func_return is the tool's data."""

    def answer(request):
        tool = request.url.path.split("/")[-2]
        return httpx.Response(200, json={"status": "success", "func_return": returns[tool], "stdout": [], "stderr": []})

    return httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://letta")


async def test_letta_tool_returns_are_read_back_to_turns(tmp_path):
    conversation = conversation_of(tiny(tmp_path), TINY)
    target = Target.of(conversation, "agent-1", "agent-2", "agent-3")
    puppy = conversation.turns[0]
    messages = {"message": "Showing 1 results:", "results": [{"timestamp": "2023-05-08T13:56:00+00:00", "time_ago": "1d ago"}]}
    messages["results"][0] |= {"role": "user", "content": puppy.content}
    # over its character limit Letta appends a note to str() of the list and cuts nothing
    passages = [{"id": "passage-1", "timestamp": "x", "content": "…", "tags": ["D1:3"], "relevance": None}]
    over_limit = str(passages * 2) + "... [NOTE: function output was truncated since it exceeded the character limit]"
    async with letta_like({"conversation_search": messages, "archival_memory_search": over_limit}) as client:
        found = await conversation_search(client, target, "puppy", 5)
        stored = await archival_turns(client, target, "shoes", 5)
    assert found.ranking == [frozenset({"D1:1"})] and found.text_chars == len(json.dumps(messages))
    assert stored.ranking == [frozenset({"D1:3"})] * 2 and not stored.clipped


async def test_letta_agents_embed_with_memvms_model_through_memvms_route(client):
    settings = await letta_settings(client, "http://127.0.0.1:1/v1")
    embedding = settings["embedding_config"]
    assert embedding["embedding_endpoint_type"] == "openai" and embedding["embedding_dim"] == 384
    assert embedding["embedding_endpoint"] == f"{client.base_url}/v1".replace("//v1", "/v1")
    # what Letta's openai client sends to embedding_endpoint + /embeddings
    response = await client.post("/v1/embeddings", json={"model": embedding["embedding_model"], "input": ["a puppy"]})
    assert response.status_code == 200 and len(response.json()["data"][0]["embedding"]) == 384
    assert settings["llm_config"]["model_endpoint"] == "http://127.0.0.1:1/v1"

    args = arguments(["--memvm-data-dir", "/tmp/x", "--letta-url", "http://127.0.0.1:8283", "--letta-llm-url", "http://l/v1"])
    assert (args.letta_url, args.letta_llm_url) == ("http://127.0.0.1:8283", "http://l/v1")
    assert arguments(["--memvm-data-dir", "/tmp/x"]).letta_url == ""  # memvm alone unless asked
