"""Hybrid search over stored messages in PostgreSQL alone: a full-text ranking (generated
tsvector, GIN) and a vector ranking (HNSW), fused with reciprocal rank fusion; a hit then lends part
of its score to the messages next to it (search/tuning.py). Optionally the full-text ranking is redone
with a few words of the first fusion's best hits (search/feedback.py)."""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Literal, get_args

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    RowMapping,
    Select,
    SmallInteger,
    String,
    Text,
    any_,
    bindparam,
    cast,
    column,
    func,
    literal,
    literal_column,
    null,
    select,
    true,
    tuple_,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvm.orm import Message
from memvm.orm.conversation import in_conversation
from memvm.orm.vector_type import Float4Vector
from memvm.search.feedback import FEEDBACK_HITS, FEEDBACK_WEIGHT, HitWords, candidate_words, expansion_words, word_weights
from memvm.search.fusion import Fused, lend_to_neighbours, reciprocal_rank_fusion
from memvm.search.lexical import TermMatch, rank_by_term_rarity, with_previous_turns
from memvm.search.tuning import DEFAULT_TUNING, SearchTuning
from memvm.search.vector_index import VECTOR_SEARCH_SETTINGS, same_model, vector_search_parameters
from memvm.threads import ANY_CONVERSATION

_in_conversation = partial(in_conversation, Message.conversation_id)  # threads.py's names

SearchMode = Literal["hybrid", "vector", "fts"]
# Each ranking contributes this many candidates (at least) before fusion.
CANDIDATES = 50
# The `term` of the vector branch's rows; full-text rows carry their lexeme's index (0, 1, ...).
VECTOR_BRANCH = -1


# Across an agent's conversations, messages follow each other in time (then by seq, their place in
# their conversation): ix_message_agent_id_created_at.
_NEWEST_FIRST = (Message.created_at.desc(), Message.seq.desc())
_OLDEST_FIRST = (Message.created_at.asc(), Message.seq.asc())
# A candidate's time as search.lexical's recency (microseconds since the epoch), computed by
# PostgreSQL: decoding a timestamp costs the server more than an integer, for each of up to 50 rows
# per word (measured: 0.13-0.2 ms more per word's branch of 50).
_RECENCY = cast(func.date_part(literal_column("'epoch'"), Message.created_at) * 1_000_000, BigInteger).label("recency")


@dataclass(frozen=True)
class QueryVector:
    model: str
    dim: int
    values: Sequence[float]


Side = Literal["before", "after"]


@dataclass(frozen=True)
class Adjacent:
    """A message's previous and next message in its conversation, and the next one's recency (None
    at either end)."""

    before: str | None
    after: str | None
    after_recency: int | None


@dataclass(frozen=True)
class MessageHit:
    message: Message
    score: Fused


async def search_messages(
    session: AsyncSession,
    *,
    agent_ids: Sequence[str],
    query: str,
    vector: QueryVector | None,
    conversation_id: str | None = ANY_CONVERSATION,
    mode: SearchMode = "hybrid",
    roles: Sequence[str] = (),
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 10,
    exclude_run_id: str | None = None,
    tuning: SearchTuning = DEFAULT_TUNING,
) -> list[MessageHit]:
    """Best first. Without a query vector, hybrid falls back to full-text alone. The query's lexemes
    and the vector search's settings come from one statement, both rankings from a second (a UNION
    ALL of their branches), the fused winners from a last; hybrid with neighbours or context adds one
    for the messages next to the candidates (context: a turn after one of the best full-text matches
    also matches its words), and with feedback two (the best hits' words, then the matches of the
    words it adds)."""
    candidates = max(CANDIDATES, 2 * limit)
    base = _filtered(select(Message.id, _RECENCY), agent_ids, roles, start, end).where(_in_conversation(conversation_id))
    if exclude_run_id is not None:
        base = base.where(Message.run_id.is_distinct_from(exclude_run_id))
    vector = vector if mode in ("hybrid", "vector") else None
    lexemes = await _prepare(session, query if mode in ("hybrid", "fts") else None, vector, candidates)
    branches = _lexeme_branches(base, lexemes, candidates)
    if vector is not None:
        branches.append(_vector_branch(base, vector, candidates))
    rows = list(await session.execute(union_all(*branches))) if branches else []
    matches = [TermMatch(row.term, row.id, row.recency) for row in rows if row.term >= 0]
    fts_ids = rank_by_term_rarity(matches, window=candidates, limit=candidates)
    # relaxed_order can return neighbours slightly out of order: rank on the exact distances.
    vector_ids = [row.id for row in sorted((r for r in rows if r.term == VECTOR_BRANCH), key=lambda r: r.distance)]
    weights: dict[int, float] = {}
    if mode == "hybrid" and tuning.feedback_terms > 0 and fts_ids:
        first = reciprocal_rank_fusion(fts_ids, vector_ids, limit=FEEDBACK_HITS, k=tuning.rrf_k)
        lent, weights = await _feedback(session, base, lexemes, [f.id for f in first], tuning.feedback_terms, candidates)
        matches = [*matches, *lent]
        fts_ids = rank_by_term_rarity(matches, window=candidates, limit=candidates, weights=weights)
    adjacent: dict[str, Adjacent] = {}
    if mode == "hybrid" and (tuning.neighbour_weight > 0 or tuning.context_weight > 0):
        # One statement serves both: the candidates' neighbours, and so the next turn of each of the
        # best full-text matches, the only ones whose words can lift a turn into the candidates.
        adjacent = await _adjacent_messages(session, base, list(dict.fromkeys([*fts_ids, *vector_ids])))
        if tuning.context_weight > 0:
            matches = with_previous_turns(matches, _next_turns(adjacent), weight=tuning.context_weight)
            fts_ids = rank_by_term_rarity(matches, window=candidates, limit=candidates, weights=weights)
    if mode == "hybrid" and tuning.neighbour_weight > 0:
        candidates_fused = reciprocal_rank_fusion(fts_ids, vector_ids, limit=len(fts_ids) + len(vector_ids), k=tuning.rrf_k)
        fused = lend_to_neighbours(candidates_fused, _neighbours(adjacent), weight=tuning.neighbour_weight, limit=limit)
    else:
        fused = reciprocal_rank_fusion(fts_ids, vector_ids, limit=limit, k=tuning.rrf_k)
    found = {m.id: m for m in await session.scalars(select(Message).where(Message.id.in_([f.id for f in fused])))}
    return [MessageHit(found[f.id], f) for f in fused if f.id in found]


def _filtered(
    query: Select[*tuple[Any, ...]], agent_ids: Sequence[str], roles: Sequence[str], start: datetime | None, end: datetime | None
) -> Select[*tuple[Any, ...]]:
    query = query.where(Message.agent_id.in_(list(agent_ids)), Message.kind == "message")
    if roles:
        query = query.where(Message.role.in_(list(roles)))
    if start is not None:
        query = query.where(Message.created_at >= start)
    if end is not None:
        query = query.where(Message.created_at <= end)
    return query


# At most this many distinct query lexemes are looked up (bounds the statement).
MAX_LEXEMES = 12


async def query_lexemes(session: AsyncSession, query: str) -> list[str]:
    """The query's distinct lexemes as PostgreSQL's english configuration makes them (stemmed, no stop
    words), in the order they first appear; at most MAX_LEXEMES."""
    return list(await session.scalar(_LEXEMES, {"query": query}) or ())


def lexeme_array() -> ColumnElement[Any]:
    """The lexemes of the `query` parameter."""
    words = func.unnest(func.to_tsvector("english", bindparam("query", type_=String))).table_valued(
        column("lexeme", Text), column("positions", ARRAY(SmallInteger)), column("weights", ARRAY(Text))
    )
    first = select(words.c.lexeme).order_by(words.c.positions[1]).limit(MAX_LEXEMES)
    return func.array(first.scalar_subquery(), type_=ARRAY(Text))


# Built once, the query a parameter: building one (and its cache key) took ~0.6 ms of CPU per search.
_LEXEMES = select(lexeme_array())
_LEXEMES_AND_SETTINGS = select(lexeme_array(), *VECTOR_SEARCH_SETTINGS)


async def _prepare(session: AsyncSession, query: str | None, vector: QueryVector | None, candidates: int) -> list[str]:
    """The lexemes of `query` (none without one) and, with a `vector`, the vector search's settings."""
    if vector is not None:
        return await lexemes_and_vector_settings(session, query or "", candidates)
    return [] if query is None else await query_lexemes(session, query)


async def lexemes_and_vector_settings(session: AsyncSession, query: str, candidates: int) -> list[str]:
    """query_lexemes, and this transaction's vector search settings for `candidates`, in one round
    trip: a search waits on round trips more than on the SQL of these two."""
    parameters = {"query": query, **vector_search_parameters(candidates)}
    return list((await session.execute(_LEXEMES_AND_SETTINGS, parameters)).one()[0])


def _lexeme_branches(
    base: Select[*tuple[Any, ...]], lexemes: Sequence[str], limit: int, *, first_term: int = 0
) -> list[Select[*tuple[Any, ...]]]:
    """One branch per lexeme: its `limit` newest matches, ranked afterwards by rarity
    (search.lexical); `term` numbers the lexemes from `first_term`. Ranking every message that
    matches ANY word reads a large share of a long history (6k-20k rows of 100k in the bench); a
    branch reads at most `limit` matches: the planner walks the newest rows first for a common
    lexeme and takes the GIN bitmap for a rare one, as each branch is planned for its own lexeme."""
    return [
        base.add_columns(literal(term).label("term"), cast(null(), Float).label("distance"))
        .where(Message.fts.op("@@")(cast(func.quote_literal(lexeme), TSQUERY)))
        .order_by(*_NEWEST_FIRST)
        .limit(limit)
        for term, lexeme in enumerate(lexemes, start=first_term)
    ]


async def _feedback(
    session: AsyncSession, base: Select[*tuple[Any, ...]], lexemes: Sequence[str], best: Sequence[str], terms: int, window: int
) -> tuple[list[TermMatch], dict[int, float]]:
    """The matches of up to `terms` words of the `best` hits (search.feedback), numbered after the
    query's lexemes, and the weight of each added word's number. The candidate words' matches come
    from the same per-lexeme branches as the query's, so their rarity is measured as the query's is."""
    weights = word_weights(await _hit_words(session, best), set(lexemes))
    pool = candidate_words(weights, terms)
    if not pool:
        return [], {}
    rows = await session.execute(union_all(*_lexeme_branches(base, pool, window, first_term=len(lexemes))))
    lent = [TermMatch(row.term, row.id, row.recency) for row in rows]
    counts = Counter(pool[m.term - len(lexemes)] for m in lent)
    added = {len(lexemes) + pool.index(word) for word in expansion_words(weights, counts, window=window, terms=terms)}
    return [m for m in lent if m.term in added], dict.fromkeys(added, FEEDBACK_WEIGHT)


async def _hit_words(session: AsyncSession, ids: Sequence[str]) -> list[HitWords]:
    """Each message's lexemes with their frequency, in the order of `ids`."""
    words = func.unnest(Message.fts).table_valued(
        column("lexeme", Text), column("positions", ARRAY(SmallInteger)), column("weights", ARRAY(Text))
    )
    frequency = func.coalesce(func.array_length(words.c.positions, 1), 1)
    ids_param = bindparam("feedback_of", list(ids), type_=ARRAY(String))
    statement = select(Message.id, words.c.lexeme, frequency.label("frequency"), func.length(Message.fts).label("length"))
    frequencies: dict[str, dict[str, int]] = {}
    lengths: dict[str, int] = {}
    # unnest in FROM may read the row before it: a function there is implicitly LATERAL.
    for row in await session.execute(statement.join(words, true()).where(Message.id == any_(ids_param))):
        frequencies.setdefault(row.id, {})[row.lexeme] = row.frequency
        lengths[row.id] = row.length
    return [HitWords(frequencies[i], lengths[i]) for i in ids if i in frequencies]


def _vector_branch(base: Select[*tuple[Any, ...]], vector: QueryVector, limit: int) -> Select[*tuple[Any, ...]]:
    distance = cast(Message.embedding, Float4Vector(vector.dim)).cosine_distance(list(vector.values))
    return (
        base.add_columns(literal(VECTOR_BRANCH).label("term"), distance.label("distance"))
        .where(same_model(Message.embedding_model, Message.embedding_dim, vector.model, vector.dim))
        .order_by(distance)
        .limit(limit)
    )


# Built once: an alias memoizes its column expressions, which takes milliseconds to redo per search.
_HIT = aliased(Message, name="hit")


async def _adjacent_messages(session: AsyncSession, base: Select[*tuple[Any, ...]], ids: Sequence[str]) -> dict[str, Adjacent]:
    """Each message's previous and next message in its agent's conversation, among those the search
    may return (`base`'s filters): a short index walk per message and side. A neighbour of another
    conversation is dropped here rather than skipped in SQL: PostgreSQL misjudges how selective a
    correlated conversation test is and then reads all of the agent's earlier rows for each hit."""
    if not ids:
        return {}
    nearest = {side: _adjacent(base, _HIT, earlier=side == "before") for side in get_args(Side)}
    columns: list[Any] = [_HIT.id, _HIT.conversation_id]
    for side, near in nearest.items():
        columns += [near.c.id.label(side), near.c.conversation_id.label(f"{side}_in"), near.c.recency.label(f"{side}_recency")]
    statement = select(*columns).select_from(_HIT)
    for near in nearest.values():
        statement = statement.outerjoin(near, true())
    # One array parameter, not an IN list: the statement's text (and so its prepared plan) stays the same.
    ids_param = bindparam("neighbours_of", list(ids), type_=ARRAY(String))
    return {
        row.id: Adjacent(_beside(row._mapping, "before")[0], *_beside(row._mapping, "after"))
        for row in await session.execute(statement.where(_HIT.id == any_(ids_param)))
    }


def _beside(row: RowMapping, side: Side) -> tuple[str | None, int | None]:
    """The message on `side` of the row's and its recency, if it is in the same conversation."""
    if row[side] is None or row[f"{side}_in"] != row["conversation_id"]:
        return None, None
    return row[side], row[f"{side}_recency"]


def _neighbours(adjacent: Mapping[str, Adjacent]) -> dict[str, list[str]]:
    """Each message's neighbours, both ways: a turn that joined the candidates only through context
    was not looked up, but it is known to follow the match that lent it its words."""
    neighbours: dict[str, list[str]] = {}
    for i, a in adjacent.items():
        for n in (a.before, a.after):
            if n is not None:
                neighbours.setdefault(i, []).append(n)
                neighbours.setdefault(n, []).append(i)
    return neighbours


def _next_turns(adjacent: Mapping[str, Adjacent]) -> dict[str, tuple[str, int]]:
    return {i: (a.after, a.after_recency) for i, a in adjacent.items() if a.after is not None and a.after_recency is not None}


def _adjacent(base: Select[*tuple[Any, ...]], hit: Any, *, earlier: bool) -> Any:
    at, hit_at = tuple_(Message.created_at, Message.seq), tuple_(hit.created_at, hit.seq)
    side, order = (at < hit_at, _NEWEST_FIRST) if earlier else (at > hit_at, _OLDEST_FIRST)
    nearest = base.with_only_columns(Message.id, Message.conversation_id, _RECENCY).where(Message.agent_id == hit.agent_id, side)
    return nearest.order_by(*order).limit(1).lateral()
