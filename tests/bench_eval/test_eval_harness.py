"""The LoCoMo harness (bench/eval/): recall computed right on a hand-made case, and a short run
against the app on that case that writes the report."""

import json
import math
from datetime import UTC, datetime

import pytest
from bench.eval.bm25 import BM25
from bench.eval.data import conversation_of, load_dir, normalize_evidence
from bench.eval.evaluate import Server, evaluate
from bench.eval.ingest import agent_file, window_chunks
from bench.eval.report import write
from bench.eval.run import analyze_of, build_report, pending_of, server_facts
from bench.eval.scoring import Outcome, all_found, recall_at_k, summarize

from tests.bench_eval.tiny import TINY, tiny


def units(*ids):
    return [frozenset([i]) for i in ids]


def test_evidence_is_normalized_and_unknown_turns_are_counted(tmp_path):
    conversation = conversation_of(tiny(tmp_path), TINY)
    assert normalize_evidence(["D8:6; D9:17", "D:11:26", "D", "D01:003"]) == ["D8:6", "D9:17", "D11:26", "D1:3"]
    [dog, violin, marathon, adversarial] = conversation.questions
    assert violin.evidence == ("D1:2", "D2:2")
    assert (marathon.evidence, marathon.unknown_evidence) == (("D2:1",), ("D9:9",))
    assert [q.text for q in conversation.scored] == [dog.text, violin.text, marathon.text]  # category 5 left out
    assert (
        conversation.turns[2].content == "Alice: He chewed my running shoes yesterday. [shares a photo of a puppy chewing a shoe]"
    )
    assert conversation.turns[5].at == datetime(2023, 6, 15, 10, 0, 1, tzinfo=UTC)  # one second per turn
    roles = [m["role"] for m in agent_file(conversation)["agents"][0]["messages"]]
    assert roles == ["system"] + ["user", "assistant"] * 4


def test_recall_at_k_against_fixed_rankings(tmp_path):
    [dog, violin, marathon] = conversation_of(tiny(tmp_path), TINY).scored
    ranking = units("D1:4", "D1:2", "D2:3", "D2:2")
    assert [recall_at_k(violin.evidence, ranking, k) for k in (1, 2, 3, 4, 20)] == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert (all_found(violin.evidence, ranking, 3), all_found(violin.evidence, ranking, 4)) == (False, True)
    sessions = [frozenset({"D2:1", "D2:2", "D2:3", "D2:4"}), frozenset({"D1:1", "D1:2", "D1:3", "D1:4"})]
    assert [recall_at_k(violin.evidence, sessions, k) for k in (1, 2)] == [0.5, 1.0]
    # the unknown D9:9 is not counted against the marathon question: its one known turn found is 1.0
    assert recall_at_k(marathon.evidence, units("D2:1"), 5) == 1.0
    assert recall_at_k(dog.evidence, [], 5) == 0.0

    outcomes = [Outcome(4, 1.0, True, 10.0, 40.0), Outcome(1, 0.5, False, 30.0, 20.0), Outcome(2, 0.0, False, 20.0, 0.0)]
    summary = summarize(outcomes, (1, 2, 3, 4))
    assert summary["recall"] == 0.5
    assert summary["recall_by_category"] == {"1": 0.5, "2": 0.0, "3": None, "4": 1.0}
    assert summary["all_evidence"] == round(1 / 3, 4)
    assert (summary["p50_ms"], summary["p95_ms"], summary["tokens_per_query"]) == (20.0, 30.0, 20.0)


def test_bm25_scores_by_hand():
    index = BM25(["a b", "a"])
    # idf(b) = ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2; doc 0: tf 1, length 2, mean length 1.5
    norm = 1.2 * (1 - 0.75 + 0.75 * 2 / 1.5)
    assert math.isclose(index.score("B", 0), math.log(2) * 2.2 / (1 + norm))
    assert index.top("b", 5) == [0]
    assert index.top("a b", 1) == [0]


def test_window_passages_cover_every_turn_of_a_session_sharing_one():
    session = list("abcdef")
    assert window_chunks(session) == [list("abc"), list("cde"), list("ef")]
    assert window_chunks(session[:5]) == [list("abc"), list("cde")]  # no window of the last turn alone
    assert window_chunks(session[:4]) == [list("abc"), list("cd")]
    assert window_chunks(session[:2]) == [list("ab")]


async def test_short_run_writes_the_report(client, db, tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    tiny(data_dir)
    conversations = load_dir(data_dir)
    memvm = Server("memvm", pending=pending_of(db), analyze=analyze_of(db), warm_query_vectors=True)
    evaluation = await evaluate(client, conversations, memvm, embed_timeout=60, log=lambda _: None)
    # the questions were planned on statistics of the imported history (too few rows for autovacuum's)
    analyzed = "SELECT last_analyze FROM pg_stat_user_tables WHERE relname = $1"
    assert await db.fetchval(analyzed, "message") is not None and await db.fetchval(analyzed, "passage") is not None
    facts = await server_facts(client, evaluation)
    out = tmp_path / "out"
    written = write(build_report(evaluation, data_dir, facts, 1.0), out)

    report = json.loads((out / "eval.json").read_text())
    assert set(report) >= {"metadata", "methods", "ks", "conversations", "groups"}
    assert report["metadata"]["embedding_model"] and report["metadata"]["memvm_version"]
    assert report["metadata"]["files"][0]["sha256"] == conversations[0].sha256
    entry = report["conversations"]["tiny"]
    assert entry["questions_scored"] == 3 and len(entry["questions_with_unknown_evidence"]) == 1
    assert "analyze" in entry["ingest_seconds"]
    assert entry["lost_turns"] == []  # the imported history gives back every turn with its time and text
    result = report["groups"]["all"]["results"]["conversation_search"]["10"]
    assert set(result) >= {"recall", "recall_by_category", "all_evidence", "p50_ms", "p95_ms", "tokens_per_query"}
    assert set(report["groups"]["all"]["results"]) == set(report["methods"])
    # an easy question: the puppy's name is in one turn, found by memvm's default (the agent's tool)
    dog = entry["per_question"][0]
    assert dog["recall"]["conversation_search"]["5"] == 1.0
    assert dog["recall"]["archival_turns"]["5"] == 1.0
    assert dog["recall"]["archival_windows"]["5"] == 1.0
    markdown = (out / "eval.md").read_text()
    assert "| `conversation_search` |" in markdown and "recall@10 by category" in markdown
    if report["plot_note"]:  # everything else was checked; the plot needs the test extra's matplotlib
        pytest.skip(report["plot_note"])
    assert out / "eval.png" in written and (out / "eval.png").stat().st_size > 1000
