"""Ingest each conversation into a server, ask every scored question to every method at every k, score."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .data import SCORED_CATEGORIES, Conversation
from .ingest import AgentSettings, Analyze, PendingCount, ingest, no_analyze, no_pending
from .methods import METHODS, Target, messages_vector
from .scoring import Outcome, all_found, recall_at_k, summarize

KS = (5, 10, 20)
TOKEN_CHARS = 4  # tokens of returned context = characters / 4
GROUPS = {"tune": ("26", "30"), "held_out": ("41", "42", "43")}


@dataclass(frozen=True)
class Server:
    """A server the conversations go into: memvm, or Letta 0.16.8 with `--letta-url`."""

    name: str
    settings: AgentSettings = field(default_factory=dict)  # merged into every agent the harness makes
    pending: PendingCount = no_pending  # messages its embedding worker has still to embed
    # statistics for the tables a conversation filled, as autovacuum gathers them within its minute
    analyze: Analyze = no_analyze
    # memvm's search routes cache a query's vector: each question is embedded once, untimed, before
    warm_query_vectors: bool = False


@dataclass
class Evaluation:
    """Outcomes per conversation, method and k, kept for the groups' aggregates."""

    methods: Sequence[str]
    ks: Sequence[int]
    outcomes: dict[str, dict[str, dict[int, list[Outcome]]]] = field(default_factory=dict)
    conversations: dict[str, dict[str, Any]] = field(default_factory=dict)

    def results(self, names: Sequence[str]) -> dict[str, dict[str, dict[str, object]]]:
        """Per method and k, the summary over the questions of these conversations pooled."""
        return {
            method: {
                str(k): summarize([o for n in names for o in self.outcomes[n][method][k]], SCORED_CATEGORIES) for k in self.ks
            }
            for method in self.methods
        }

    def groups(self) -> dict[str, dict[str, Any]]:
        """All conversations together, and the tune and held-out sets when any of theirs ran."""
        names = list(self.outcomes)
        chosen = {"all": names} | {g: [n for n in names if n in members] for g, members in GROUPS.items()}
        return {g: {"conversations": members, "results": self.results(members)} for g, members in chosen.items() if members}


def describe(conversation: Conversation) -> dict[str, Any]:
    scored = conversation.scored
    unknown = [
        {"question": q.text, "category": q.category, "unknown_evidence": list(q.unknown_evidence), "kept": list(q.evidence)}
        for q in conversation.questions
        if q.unknown_evidence
    ]
    return {
        "file": str(conversation.path),
        "sha256": conversation.sha256,
        "speakers": list(conversation.speakers),
        "sessions": len(conversation.sessions),
        "turns": len(conversation.turns),
        "questions": len(conversation.questions),
        "questions_scored": len(scored),
        "questions_by_category": {str(c): sum(q.category == c for q in scored) for c in SCORED_CATEGORIES},
        "questions_with_unknown_evidence": unknown,
        "questions_without_usable_evidence": sum(
            1 for q in conversation.questions if q.category in SCORED_CATEGORIES and not q.evidence
        ),
    }


async def ask_all(
    client: httpx.AsyncClient, target: Target, evaluation: Evaluation, warm: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every method at every k for every scored question; per-question recall for the JSON."""
    per_question = [
        {"question": q.text, "category": q.category, "evidence": list(q.evidence), "recall": {}}
        for q in target.conversation.scored
    ]
    outcomes: dict[str, dict[int, list[Outcome]]] = {}
    clipped: dict[str, int] = {}
    # Untimed: the routes cache a query's vector, so without this whichever of them came first would pay
    # each question's embedding. The tools embed on every call (as in a turn), cached or not.
    for question in target.conversation.scored if warm else ():
        await messages_vector(client, target, question.text, 1)
    for method in evaluation.methods:
        ask = METHODS[method][1]
        outcomes[method] = {}
        for k in evaluation.ks:
            outcomes[method][k] = []
            for question, row in zip(target.conversation.scored, per_question, strict=True):
                answer = await ask(client, target, question.text, k)
                recall = recall_at_k(question.evidence, answer.ranking, k)
                found = all_found(question.evidence, answer.ranking, k)
                outcomes[method][k].append(
                    Outcome(question.category, recall, found, answer.latency_ms, answer.text_chars / TOKEN_CHARS)
                )
                row["recall"].setdefault(method, {})[str(k)] = round(recall, 4)
                clipped[method] = clipped.get(method, 0) + answer.clipped
    evaluation.outcomes[target.conversation.name] = outcomes
    return {m: n for m, n in clipped.items() if n}, per_question


async def evaluate(
    client: httpx.AsyncClient,
    conversations: Sequence[Conversation],
    server: Server,
    *,
    methods: Sequence[str] = tuple(METHODS),
    ks: Sequence[int] = KS,
    embed_timeout: float = 1800.0,
    log: Any = print,
    done: Callable[[Evaluation], None] = lambda _: None,
) -> Evaluation:
    """Every conversation into the server and every question asked; `done` sees the evaluation after
    each conversation (to save what is measured so far)."""
    evaluation = Evaluation(methods, ks)
    for conversation in conversations:
        entry = describe(conversation)
        name = f"{server.name} {conversation.name}"
        log(f"{name}: {entry['turns']} turns, {entry['questions_scored']} scored questions; ingesting")
        ingested = await ingest(client, conversation, server.settings, server.pending, embed_timeout)
        start = time.perf_counter()
        await server.analyze()
        ingested.seconds["analyze"] = round(time.perf_counter() - start, 2)
        log(f"{name}: ingested in {sum(ingested.seconds.values()):.1f} s {ingested.seconds}; querying")
        if ingested.lost_turns:
            log(f"{name}: {len(ingested.lost_turns)} turns not listed back after the import: {ingested.lost_turns[:10]}")
        start = time.perf_counter()
        target = Target.of(conversation, ingested.agent_id, ingested.session_agent_id, ingested.window_agent_id)
        clipped, per_question = await ask_all(client, target, evaluation, server.warm_query_vectors)
        entry |= {
            "lost_turns": ingested.lost_turns,
            "agent_id": ingested.agent_id,
            "session_agent_id": ingested.session_agent_id,
            "window_agent_id": ingested.window_agent_id,
            "ingest_seconds": ingested.seconds,
            "query_seconds": round(time.perf_counter() - start, 2),
            "clipped_tool_returns": clipped,
            "results": evaluation.results([conversation.name]),
            "per_question": per_question,
        }
        evaluation.conversations[conversation.name] = entry
        log(f"{name}: {len(per_question)} questions asked in {entry['query_seconds']} s")
        done(evaluation)
    return evaluation
