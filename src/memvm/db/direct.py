"""The statements a turn runs every time, sent as SQL compiled once through the session's connection.

A statement the session runs pays, at every execution, for the ORM's part: the tenancy criteria
(db/tenancy.py), compiling an ORM statement or one built per call, and turning rows into objects or
ORM rows. Measured on one process (CPU per execution, the same SQL and rows): the context window's
read 0.58-0.70 ms through the session, 0.19-0.21 ms direct (8 messages; 1.18-1.28 against
0.58-0.64 with 248), a run's start 0.94-1.14 against 0.42-0.48, its end 0.59-0.72 against 0.14-0.22. A
Core statement built once gains nothing this way (a step's insert: 0.55-0.66 ms both ways), so
those stay with the session.

Once its transaction has begun (or in a read-only unit of work, which has none), a direct statement
goes to the driver (asyncpg) itself, past SQLAlchemy's execution (a greenlet, a cursor, the result's
set-up): 0.055-0.063 ms of CPU per run of a one-row read against 0.23-0.39 through `exec_driver_sql`
(one process, 400 runs, three rounds). What the connection does is kept: a transaction's first
statement still goes through SQLAlchemy, which sends the BEGIN (with the unit of work's options)
before it; a driver error becomes the very exception SQLAlchemy raises for it (the connection
invalidated when it was lost, the engine's `handle_error` events run), which api/errors.py's table
maps as any other; rows come back as SQLAlchemy's rows. While anything listens to the statements
SQLAlchemy sends (`before_cursor_execute`, as tests that record them do), they all go through it.

Tenancy: a direct statement names its organization as the bound parameter `organization_id`, which
`run` always fills from the session's scope; a statement without it is refused at its first run, a
caller cannot pass another organization, and a session across organizations cannot run one. A
statement that writes is refused in a read-only unit of work (db/uow.py's `reading`), as the
session's are; what the session has pending is flushed first, as the session would.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NoReturn, cast

from sqlalchemy import ClauseElement, ColumnElement, Result, bindparam, null
from sqlalchemy.engine import Dialect, IteratorResult
from sqlalchemy.engine.result import SimpleResultMetaData
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import Null
from sqlalchemy.sql.selectable import ReturnsRows
from sqlalchemy.types import TypeEngine
from sqlalchemy.util import greenlet_spawn

from memvm.db import tenancy, uow

ORGANIZATION = "organization_id"


class NotDirect(ValueError):
    """A statement that cannot run directly, or run without what it needs (a bug in memvm)."""


@dataclass(frozen=True)
class _Compiled:
    dialect: Dialect
    sql: str
    names: tuple[str, ...]  # the bound parameters in the order of $1, $2, ...
    required: frozenset[str]  # those the caller gives (the others the statement carries: literals)
    defaults: Mapping[str, Any]
    processors: tuple[Callable[[Any], Any] | None, ...]  # each parameter's bind processor (JSON's dumps)
    columns: tuple[str, ...]  # what it returns, for an empty result (a row's own names are PostgreSQL's)


class Direct:
    """A statement compiled once, at its first run, for the engine's dialect. `tenant=False` is for a
    statement that reads no table of an organization's (a search's settings and the words of its query):
    it need not bind `organization_id`."""

    def __init__(self, statement: ClauseElement, *, tenant: bool = True) -> None:
        self.statement = statement
        self.tenant = tenant
        # Writes, or locks rows (FOR UPDATE/SHARE; no public accessor, as in db/uow.py).
        self.writes = bool(getattr(statement, "is_dml", False)) or getattr(statement, "_for_update_arg", None) is not None
        self._compiled: _Compiled | None = None

    def compiled_for(self, dialect: Dialect) -> _Compiled:
        compiled = self._compiled
        if compiled is None or compiled.dialect is not dialect:
            compiled = self._compiled = _compile(self.statement, dialect, self.tenant)
        return compiled


def _compile(statement: ClauseElement, dialect: Dialect, tenant: bool) -> _Compiled:
    compiled = cast(SQLCompiler, statement.compile(dialect=dialect))
    binds = compiled.binds
    if tenant and ORGANIZATION not in binds:
        raise NotDirect(f"a direct statement binds `{ORGANIZATION}`, which run() fills in: {str(compiled)[:200]}")
    if any(bind.expanding or bind.literal_execute for bind in binds.values()):
        raise NotDirect("a direct statement's parameters are sent as they are: no IN list, no literal_execute")
    if compiled.insert_prefetch or compiled.update_prefetch:
        raise NotDirect("a direct statement's columns have no Python-side default, which only SQLAlchemy's execution computes")
    names = tuple(compiled.positiontup or ())
    processors = tuple(binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names)
    required = frozenset(name for name, bind in binds.items() if bind.required) - {ORGANIZATION}
    columns = tuple(statement.exported_columns.keys()) if isinstance(statement, ReturnsRows) else ()
    return _Compiled(dialect, compiled.string, names, required, dict(compiled.params), processors, columns)


async def run(session: AsyncSession, statement: Direct, params: Mapping[str, Any] | None = None) -> Result[Any]:
    """Run the statement in the session's transaction, in its organization; what pends in the
    session is flushed first, as the session does before its own statements."""
    organization_id = tenancy.organization_of(session.sync_session)
    if organization_id == tenancy.ALL_ORGANIZATIONS:
        raise tenancy.UnscopedSession("a direct statement runs in one organization; this session works across them")
    reading = uow.is_reading(session)
    if statement.writes and reading:
        raise uow.WriteWhileReading(f"a read-only unit of work may only SELECT, not run: {str(statement.statement)[:200]}")
    if params and ORGANIZATION in params:
        raise NotDirect(f"`{ORGANIZATION}` is the session's; run() fills it in")
    if session.new or session.dirty or session.deleted:
        await session.flush()
    connection = await session.connection()
    compiled = statement.compiled_for(connection.dialect)
    arguments = _arguments(compiled, params or {}, organization_id)
    driver = await _driver(connection, reading=reading)
    if driver is None:
        return await connection.exec_driver_sql(compiled.sql, arguments)
    try:
        records = await driver.fetch(compiled.sql, *arguments)
    except Exception as error:
        await _raise_as_sqlalchemy(connection, error, compiled.sql, arguments)
    return IteratorResult(_metadata(tuple(records[0].keys()) if records else compiled.columns), iter(records))


async def _driver(connection: AsyncConnection, *, reading: bool) -> Any:
    """asyncpg's connection, when a statement may skip SQLAlchemy: once the transaction has begun (a
    read-only unit has none), and while nothing listens to the statements SQLAlchemy sends (an
    engine's events, as tests record them: those see every statement). None otherwise."""
    driver = (await connection.get_raw_connection()).driver_connection
    dispatch = connection.sync_connection.dispatch  # type: ignore[union-attr]
    if driver is None or dispatch.before_cursor_execute or dispatch.after_cursor_execute:
        return None
    return driver if reading or driver.is_in_transaction() else None


@cache
def _metadata(keys: tuple[str, ...]) -> SimpleResultMetaData:
    """Rows' column names, as SQLAlchemy's results carry them (one per shape of result)."""
    return SimpleResultMetaData(keys)


async def _raise_as_sqlalchemy(connection: AsyncConnection, error: Exception, sql: str, arguments: Sequence[Any]) -> NoReturn:
    """Raise what SQLAlchemy raises for this driver error: the DB-API error its adapter maps the
    driver's to, wrapped by the connection (which invalidates itself if the error says it was lost,
    and runs the engine's handle_error events)."""
    synchronous = connection.sync_connection
    assert synchronous is not None  # it is: the connection was just used
    try:
        synchronous.connection.dbapi_connection._handle_exception(error)  # type: ignore[union-attr]
    except Exception as translated:
        error = translated
    await greenlet_spawn(synchronous._handle_dbapi_exception, error, sql, tuple(arguments), None, None)
    raise AssertionError("unreachable: SQLAlchemy raises for every driver error")


def _arguments(compiled: _Compiled, params: Mapping[str, Any], organization_id: str) -> tuple[Any, ...]:
    """The values of $1, $2, ..., each through its type's bind processor."""
    if missing := compiled.required.difference(params):
        raise NotDirect(f"a direct statement run without {', '.join(sorted(missing))}")
    if unknown := set(params).difference(compiled.names):
        raise NotDirect(f"a direct statement has no parameter {', '.join(sorted(unknown))}: its value would be dropped")
    given = {**compiled.defaults, **params, ORGANIZATION: organization_id}
    return tuple(
        given[name] if process is None else process(given[name])
        for name, process in zip(compiled.names, compiled.processors, strict=True)
    )


class ByNull:
    """A direct statement in two forms, by a parameter that may be None (a message's or run's
    conversation: None is the agent's default one). `build` gets the parameter as SQL NULL or as the
    bound parameter, and compares with `equals`, so each form keeps its index: `IS NULL` and `= $n`
    (one form for both, `IS NOT DISTINCT FROM`, no index serves)."""

    def __init__(self, name: str, type_: TypeEngine[Any], build: Callable[[ColumnElement[Any]], ClauseElement]) -> None:
        self.name = name
        self.when_null = Direct(build(null()))
        self.when_given = Direct(build(bindparam(name, type_=type_)))

    async def run(self, session: AsyncSession, params: Mapping[str, Any]) -> Result[Any]:
        if params[self.name] is None:
            return await run(session, self.when_null, {name: value for name, value in params.items() if name != self.name})
        return await run(session, self.when_given, params)


def equals(column: ColumnElement[Any], value: ColumnElement[Any]) -> ColumnElement[bool]:
    """`column` is `value`, as ByNull's `build` compares: IS NULL for its NULL form."""
    return column.is_(None) if isinstance(value, Null) else column == value
