"""What the agent's file tools find in the files it has been given (its agent_file rows): grep_files,
a PostgreSQL regex over the files' lines, and search_files, a hybrid full-text and vector search over
their chunks. Both answer with the tool's text (files/results.py) and mark the files they found
something in as just used (views.touch), as Letta does.

A chunk is a run of whole lines numbered as in the file, so line k of a chunk is the file's line
start_line + k - 1; a line too long for one chunk is split over several chunks that all give it the
same number, and its pieces are joined again (in seq order) wherever a line is shown."""

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Float, Select, Text, cast, column, func, literal, null, or_, select, true, union_all
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import InvalidInput
from memvm.files import views
from memvm.files.results import (
    MAX_COLLECTED,
    GrepMatch,
    GrepPage,
    Passage,
    checked_pattern,
    include_regex,
    passages_text,
    postgres_regex,
)
from memvm.orm import AgentFile, FileChunk, FolderFile
from memvm.orm.vector_type import Float4Vector
from memvm.search.conversation import CANDIDATES, query_lexemes
from memvm.search.fusion import fuse_rankings
from memvm.search.lexical import TermMatch, rank_by_term_rarity
from memvm.search.vector_index import prefer_vector_index, same_model

# A pattern PostgreSQL's regex engine takes longer than this on is cancelled by the database itself.
GREP_TIMEOUT_SECONDS = 30.0
MAX_SEMANTIC_RESULTS = 50  # Letta's cap on semantic_search_files' limit
MAX_CONTEXT_LINES = 50
_INVALID_REGEX = "2201B"
_QUERY_CANCELED = "57014"


async def grep_files(
    session: AsyncSession, agent_id: str, pattern: str, *, include: str | None, context_lines: int, offset: int
) -> str:
    """Every line of the agent's files that `pattern` matches (case-insensitive, PostgreSQL's regex
    flavour), at most MAX_COLLECTED, in file name and line order; the page from `offset`, with
    `context_lines` lines around each match."""
    pattern = checked_pattern(pattern)
    file_filter = include_regex(include)
    if context_lines > MAX_CONTEXT_LINES:
        raise InvalidInput(
            f"context_lines is at most {MAX_CONTEXT_LINES} (got {context_lines}); open_files shows more of a file."
        )
    async with _time_limited(session):
        files = list(await session.execute(_attached_files(agent_id, file_filter)))
        if not files:
            return "No files are currently attached to search"
        ids = {row.file_name: row.file_id for row in files if row.included}
        if not ids:
            return f"No files match the filename pattern '{include}' (filtered {len(files)} files)"
        found = [
            GrepMatch(row.file_name, row.line)
            for row in await session.execute(_matching_lines(ids.values(), postgres_regex(pattern)))
        ]
        page = GrepPage(pattern, include, found, max(0, offset), max(0, context_lines))
        lines = await _lines_between(session, [(ids[name], first, last) for name, first, last in page.wanted()])
    await views.touch(session, agent_id, sorted({ids[match.file_name] for match in found}))
    return page.text(_by_name(page, lines, files))


def _by_name(page: GrepPage, lines: Mapping[tuple[str, int], str], files: Sequence[Any]) -> dict[tuple[str, int], str]:
    """The page's lines by (file name, line) instead of file id. A line of the file that no chunk
    holds is blank: a chunk of blank lines alone is left out."""
    names = {row.file_id: row.file_name for row in files}
    shown = {(names[file_id], line): text for (file_id, line), text in lines.items()}
    line_counts = {row.file_name: row.line_count or 0 for row in files}
    for name, first, last in page.wanted():
        shown |= {(name, n): "" for n in range(max(1, first), min(last, line_counts[name]) + 1) if (name, n) not in shown}
    return shown


@asynccontextmanager
async def _time_limited(session: AsyncSession) -> AsyncIterator[None]:
    """Run the block's statements under statement_timeout, so the database cancels a pathological
    pattern (no Python thread is left spinning); the transaction's own setting comes back after.
    An invalid pattern or a cancelled search becomes the tool's error, and the tool call's savepoint
    rolls back what the failed statement aborted."""
    previous = await session.scalar(select(func.current_setting("statement_timeout")))
    await session.execute(select(func.set_config("statement_timeout", f"{int(GREP_TIMEOUT_SECONDS * 1000)}ms", True)))
    try:
        yield
    except DBAPIError as error:
        raise _as_tool_error(error) from None
    await session.execute(select(func.set_config("statement_timeout", previous, True)))


def _as_tool_error(error: DBAPIError) -> Exception:
    sqlstate = getattr(error.orig, "sqlstate", None)
    if sqlstate == _INVALID_REGEX:
        reason = str(error.orig).rpartition("invalid regular expression: ")[2]
        return InvalidInput(f"Invalid regex pattern: {reason}. Patterns use PostgreSQL's regular expression syntax.")
    if sqlstate == _QUERY_CANCELED:
        return InvalidInput(
            f"The search took longer than {GREP_TIMEOUT_SECONDS:g} seconds and was cancelled; use a simpler pattern "
            "or narrow the files with include."
        )
    return error


def _attached_files(agent_id: str, file_filter: str | None) -> Select[Any]:
    """The agent's files by name, each marked whether the filename filter keeps it."""
    included = FolderFile.file_name.op("~*")(file_filter) if file_filter is not None else true()
    return (
        select(AgentFile.file_id, FolderFile.file_name, FolderFile.line_count, included.label("included"))
        .join(FolderFile, FolderFile.id == AgentFile.file_id)
        .where(AgentFile.agent_id == agent_id)
        .order_by(FolderFile.file_name)
    )


def _split_lines() -> Any:
    """Each chunk's lines as rows (text, ord), to join laterally with FileChunk."""
    return (
        func.string_to_table(FileChunk.text, "\n")
        .table_valued(column("text", Text), with_ordinality="ord")
        .render_derived("line")
        .lateral()
    )


def _matching_lines(file_ids: Sequence[str] | Any, pattern: str) -> Select[Any]:
    """(file_name, line) of the lines `pattern` matches, one more than MAX_COLLECTED at most."""
    lines = _split_lines()
    line = (FileChunk.start_line + lines.c.ord - 1).label("line")
    return (
        select(FolderFile.file_name, line)
        .distinct()  # a long line's pieces may each match
        .join_from(FileChunk, lines, true())
        .join(FolderFile, FolderFile.id == FileChunk.file_id)
        .where(FileChunk.file_id.in_(list(file_ids)), lines.c.text.op("~*")(pattern))
        .order_by(FolderFile.file_name, line)
        .limit(MAX_COLLECTED + 1)
    )


async def _lines_between(session: AsyncSession, ranges: Sequence[tuple[str, int, int]]) -> dict[tuple[str, int], str]:
    """The text of the lines in each (file id, first, last) range, by (file id, line)."""
    if not ranges:
        return {}
    lines = _split_lines()
    line = FileChunk.start_line + lines.c.ord - 1
    rows = await session.execute(
        select(FileChunk.file_id, line.label("line"), lines.c.text)
        .join_from(FileChunk, lines, true())
        .where(
            or_(
                *(
                    (FileChunk.file_id == file_id) & (FileChunk.end_line >= first) & (FileChunk.start_line <= last)
                    for file_id, first, last in ranges
                )
            )
        )
        .order_by(FileChunk.file_id, FileChunk.seq, lines.c.ord)
    )
    joined: dict[tuple[str, int], str] = {}
    for row in rows:
        joined[row.file_id, row.line] = joined.get((row.file_id, row.line), "") + row.text
    return joined


async def search_files(
    session: AsyncSession,
    agent_id: str,
    query_vectors_by_model: Mapping[EmbeddingModel, Sequence[float]],
    query: str,
    limit: int,
) -> str:
    """The chunks of the agent's files that best match `query`: a full-text ranking and one vector
    ranking per embedding model of the agent's folders (each model embedded the query; a model with
    no vector here is left to full text), fused by rank (RRF), as archival search across models does."""
    query = query.strip()
    if not query:
        raise InvalidInput("Empty search query provided; pass what to look for.")
    if limit < 1:
        raise InvalidInput(f"limit must be at least 1 (got {limit}).")
    ranked = await _ranked_chunks(session, agent_id, query_vectors_by_model, query, min(limit, MAX_SEMANTIC_RESULTS))
    passages = await _passages(session, ranked)
    await views.touch(session, agent_id, sorted({file_id for file_id, _ in passages}))
    return passages_text(query, [passage for _, passage in passages])


async def _ranked_chunks(
    session: AsyncSession, agent_id: str, vectors: Mapping[EmbeddingModel, Sequence[float]], query: str, limit: int
) -> list[int]:
    """Ids of the best `limit` chunks: the rankings come back from one statement (a UNION ALL of their
    branches) and are fused by rank."""
    candidates = max(CANDIDATES, 2 * limit)
    models = list(vectors)
    branches = await _fts_branches(session, agent_id, query, candidates)
    if models:
        await prefer_vector_index(session, candidates)
        branches += [_vector_branch(agent_id, n, model, vectors[model], candidates) for n, model in enumerate(models)]
    rows = list(await session.execute(union_all(*branches))) if branches else []
    fts_ids = rank_by_term_rarity(
        [TermMatch(row.term, str(row.id), -row.id) for row in rows if row.term >= 0], window=candidates, limit=candidates
    )
    # relaxed_order can return neighbours slightly out of order: rank on the exact distances.
    by_model = [sorted((r for r in rows if r.term == _model_term(n)), key=lambda r: r.distance) for n in range(len(models))]
    fused = fuse_rankings([fts_ids, *([str(r.id) for r in ranked] for ranked in by_model)], limit=limit)
    return [int(chunk_id) for chunk_id, _ in fused]


def _model_term(n: int) -> int:
    """The `term` of model n's vector rows; full-text rows carry their lexeme's index (0, 1, ...)."""
    return -1 - n


def _agents_chunks(agent_id: str, *columns: Any) -> Select[Any]:
    files = select(AgentFile.file_id).where(AgentFile.agent_id == agent_id)
    folders = select(AgentFile.folder_id).where(AgentFile.agent_id == agent_id)
    # folder_id leads the (folder_id, fts) GIN index
    return select(FileChunk.id, *columns).where(FileChunk.folder_id.in_(folders), FileChunk.file_id.in_(files))


async def _fts_branches(session: AsyncSession, agent_id: str, query: str, limit: int) -> list[Select[Any]]:
    """One branch per query lexeme: its `limit` chunks where it weighs most, ranked afterwards by the
    lexemes' rarity (search/lexical.py), as message search does."""
    branches = []
    for term, lexeme in enumerate(await query_lexemes(session, query)):
        word = cast(func.quote_literal(lexeme), TSQUERY)
        branches.append(
            _agents_chunks(agent_id, literal(term).label("term"), cast(null(), Float).label("distance"))
            .where(FileChunk.fts.op("@@")(word))
            .order_by(func.ts_rank(FileChunk.fts, word).desc(), FileChunk.id)
            .limit(limit)
        )
    return branches


def _vector_branch(agent_id: str, n: int, model: EmbeddingModel, vector: Sequence[float], limit: int) -> Select[Any]:
    distance = cast(FileChunk.embedding, Float4Vector(model.dim)).cosine_distance(list(vector))
    return (
        _agents_chunks(agent_id, literal(_model_term(n)).label("term"), distance.label("distance"))
        .where(same_model(FileChunk.embedding_model, FileChunk.embedding_dim, model.model, model.dim))
        .order_by(distance)
        .limit(limit)
    )


async def _passages(session: AsyncSession, chunk_ids: Sequence[int]) -> list[tuple[str, Passage]]:
    """(file id, passage) of each chunk, in the order given."""
    rows = await session.execute(
        select(FileChunk.id, FileChunk.file_id, FolderFile.file_name, FileChunk.start_line, FileChunk.end_line, FileChunk.text)
        .join(FolderFile, FolderFile.id == FileChunk.file_id)
        .where(FileChunk.id.in_(list(chunk_ids)))
    )
    found = {row.id: row for row in rows}
    return [
        (row.file_id, Passage(row.file_name, row.start_line, row.end_line, row.text))
        for chunk_id in chunk_ids
        if (row := found.get(chunk_id)) is not None
    ]
