"""The server's own SQL, compiled from memvm.search.* (so the bench follows src/ changes), run directly
with its settings and parameters, timed and explained."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from typing import Any

import asyncpg
import numpy as np

from .common import DIM, MODEL, stats_ms
from .queries import QUERIES

_MARKER = [0.123456] * DIM  # stands in for the query vector, so the compiled statement shows where it goes
_VEC_LITERAL = re.compile(r"'\[[-0-9.e,]{200,}\]'")

Compiled = tuple[str, list[str], dict[str, Any]]


class _Capture:
    """Stands in for an AsyncSession: records every statement memvm.search.conversation would execute,
    with the parameters passed alongside (e.g. text("... :ef"), {"ef": "40"})."""

    def __init__(self, lexemes: list[str] | None = None) -> None:
        self.statements: list[tuple[Any, dict[str, Any] | None]] = []
        self.lexemes = lexemes or []  # what the server's lexeme lookup would return

    async def execute(self, statement, params=None, *a, **k):
        self.statements.append((statement, params))
        lexemes = self.lexemes if "to_tsvector" in str(statement) else []

        class _R(list):
            def all(self):
                return []

            def one(self):
                return (lexemes,)  # the server's lexeme lookup, which also makes the vector settings

        return _R()

    async def scalar(self, statement, params=None, *a, **k):
        # the lexeme lookup of a full-text-only search
        self.statements.append((statement, params))
        return self.lexemes if "to_tsvector" in str(statement) else None

    async def scalars(self, statement, params=None, *a, **k):
        if "to_tsvector" in str(statement):  # the server's lexeme lookup: answer it, it is not the statement timed
            return self.lexemes
        self.statements.append((statement, params))
        return []

    def compiled(self) -> list[Compiled]:
        return [_compiled(st, params) for st, params in self.statements]


def _compiled(statement, params: dict[str, Any] | None = None) -> Compiled:
    from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg

    # The parameters go in at execution, as the server passes them (lists expanded for IN).
    expanded = statement.compile(dialect=pg_asyncpg.dialect()).construct_expanded_state(params)
    return expanded.statement, list(expanded.positiontup or []), dict(expanded.parameters)


def _is_setting(sql: str) -> bool:
    """A statement that sets the transaction up: not a ranking (`<=>`; the walk turns sorts back on)."""
    settings = "hnsw." in sql or "ivfflat." in sql or "enable_sort" in sql
    return (settings and "<=>" not in sql) or sql.lstrip().upper().startswith("SET ")


@dataclasses.dataclass
class ServerSql:
    """A statement as the server sends it, with the settings statements (SET LOCAL / set_config) it runs
    before it in the same transaction; `sets` holds (sql, args) pairs."""

    name: str
    sets: list[tuple[str, list[Any]]]
    sql: str
    names: list[str]
    params: dict[str, Any]
    vector_name: str | None

    def args(self, vector: np.ndarray | None = None) -> list[Any]:
        out = []
        for n in self.names:
            v = self.params[n]
            if n == self.vector_name:
                v = vector if vector is not None else np.asarray(_MARKER, dtype=np.float32)
            out.append(v)
        return out

    def as_dict(self) -> dict[str, Any]:
        shown = {n: (f"<{DIM}-d query vector>" if n == self.vector_name else self.params[n]) for n in self.names}
        return {"sets": self.sets, "sql": self.sql, "params_in_order": shown}


def _server_sql(name: str, compiled: list[Compiled], sql: Compiled, with_vector: bool) -> ServerSql:
    text, names, params = sql
    sets = [(s, [p[n] for n in ns]) for s, ns, p in compiled if _is_setting(s)]
    vector_name = _vector_param(names, params) if with_vector else None
    return ServerSql(name, sets, text, names, params, vector_name)


def _vector_param(names: list[str], params: dict[str, Any]) -> str:
    return next(n for n in names if _is_marker(params[n]))


def _is_marker(value: Any) -> bool:
    """The query vector as a search passes it: a list, or already packed for the wire (archival search)."""
    from memvm.db.vectors import vector_bytes

    if isinstance(value, bytes):
        return value == vector_bytes(_MARKER)
    return isinstance(value, list) and len(value) == DIM and value[0] == _MARKER[0]


async def archival_sql(conn: asyncpg.Connection, archive_id: str, top_k: int, tags: list[str]) -> ServerSql:
    """The vector-only statement the server runs for this archive: through the HNSW index or exactly,
    as the server's own first statement (and, with a tag, its count) decides, asked here on `conn`.
    The search's statements name their organization (memvm/db/direct.py): the archive's."""
    from memvm.search import passages
    from memvm.search.vector_index import vector_search_parameters

    search = passages.PassageSearch(archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=_MARKER, top_k=top_k, tags=tags)
    organization = {"organization_id": await conn.fetchval("SELECT organization_id FROM archive WHERE id = $1", archive_id)}
    preparation = search.preparation(False)
    settings = {**vector_search_parameters(top_k), **organization}
    if preparation.decides:
        settings.update(search.filter_parameters(top_k))
    sets = [_compiled(preparation.statement.statement, settings)]
    counted = None if preparation.decides else search.index_pays_statement()
    if counted is not None:
        sets.append(_compiled(counted.statement, {**search.filter_parameters(top_k), **organization}))
    async with conn.transaction():
        answers = [await conn.fetchrow(sql, *[params[n] for n in names]) for sql, names, params in sets]
    index_pays = bool(answers[-1]["pays"]) if preparation.decides or counted is not None else False
    statement = search.statement(indexed=index_pays).statement
    sql = _compiled(statement, {**search.parameters(top_k), **organization})
    return _server_sql("archival" + ("+tags" if tags else ""), sets, sql, True)


async def conversation_sql(conn: asyncpg.Connection, agent_id: str, query: str, limit: int, mode: str) -> ServerSql:
    """The server's ranking statement for this query and search mode: its full-text branches (one per
    query lexeme, so it is compiled per query; the lexemes come from PostgreSQL, as in the server)
    and/or its vector branch, in one UNION ALL."""
    from memvm.search import conversation

    rows = await conn.fetch(
        "SELECT lexeme FROM unnest(to_tsvector('english', $1::text)) ORDER BY positions[1] LIMIT $2",
        query,
        conversation.MAX_LEXEMES,
    )
    cap = _Capture([r["lexeme"] for r in rows])
    vector = conversation.QueryVector(MODEL, DIM, _MARKER)
    await conversation.search_messages(cap, agent_ids=[agent_id], query=query, vector=vector, mode=mode, limit=limit)
    compiled = cap.compiled()
    sql = next(c for c in compiled if "UNION ALL" in c[0] or "@@" in c[0] or "<=>" in c[0])
    return _server_sql(f"conversation {mode} rankings", compiled, sql, mode != "fts")


def short_plan(rows: list) -> str:
    return _VEC_LITERAL.sub("'[<384-d query vector>]'", "\n".join(r[0] for r in rows))


def sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, np.ndarray):
        return "'[" + ",".join(repr(float(x)) for x in v) + "]'"
    if isinstance(v, list):
        return "ARRAY[" + ",".join(sql_literal(x) for x in v) + "]::text[]"
    return "'" + str(v).replace("'", "''") + "'"


async def run_server_sql(
    conn: asyncpg.Connection, s: ServerSql, args: list[Any], *, explain: str | None = None
) -> tuple[float, list]:
    async with conn.transaction():
        for st, st_args in s.sets:
            await conn.execute(st, *st_args)
        t = time.perf_counter()
        rows = await conn.fetch((explain + " " if explain else "") + s.sql, *args)
        dt = time.perf_counter() - t
    return dt, rows


async def _generic_plan(conn: asyncpg.Connection, st: ServerSql, args: list[Any]) -> str:
    try:
        async with conn.transaction():
            for x, x_args in st.sets:
                await conn.execute(x, *x_args)
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            await conn.execute("PREPARE bench_generic AS " + st.sql)
            try:
                literals = ", ".join(sql_literal(v) for v in args)
                return short_plan(await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_generic(" + literals + ")"))
            finally:
                await conn.execute("DEALLOCATE bench_generic")
    except Exception as e:
        return f"(generic plan check failed: {type(e).__name__}: {e})"


async def sql_profile(
    conn: asyncpg.Connection,
    s: ServerSql,
    n: int,
    vec_for: Callable[[str], np.ndarray] | None = None,
    sql_for: Callable[[str], ServerSql] | None = None,
) -> dict[str, Any]:
    """The server's statement run directly (same SET LOCALs, same parameters), timed at the client;
    EXPLAIN (ANALYZE, BUFFERS) of it, and the plan PostgreSQL would use for it as a generic
    (parameter-independent) prepared statement, which asyncpg's statement cache can end up running."""

    def statement(q: str) -> tuple[ServerSql, list[Any]]:
        st = sql_for(q) if sql_for else s
        return st, st.args(vec_for(q) if vec_for else None)

    lat = []
    for i in range(n):
        dt, _ = await run_server_sql(conn, *statement(QUERIES[i % len(QUERIES)]))
        lat.append(dt)
    st0, args0 = statement(QUERIES[0])
    _, rows = await run_server_sql(conn, st0, args0, explain="EXPLAIN (ANALYZE, BUFFERS)")
    return {
        "statement": st0.as_dict(),
        "client_timed": stats_ms(lat),
        "explain_analyze": short_plan(rows),
        "generic_plan_explain_analyze": await _generic_plan(conn, st0, args0),
    }
