"""Shared request dependencies: what the lifespan built (typed), the units of work, id path
parameters, If-Match, pagination.

Every dependency is `async def`, even when it awaits nothing: FastAPI runs a plain `def` one in a
worker thread, and that hop was a tenth of a block read's server time."""

import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Annotated, Literal, Protocol, TypeVar

from fastapi import Depends, Header, Path, Query, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.actors import Caller
from memvm.api.auth import CallerDep
from memvm.blocks.schemas import HistoryPage
from memvm.db.pagination import PageRequest
from memvm.db.uow import reading, transaction
from memvm.errors import InvalidInput
from memvm.ids import id_pattern
from memvm.memory.rules import MAX_VERSION
from memvm.runtime.loop.deps import RuntimeDeps


# What the lifespan (main.py) puts on app.state, as typed dependencies: routes name the real classes
# (mypy checks their use); a test may swap what app.state holds.
async def app_runtime(request: Request) -> RuntimeDeps:
    runtime: RuntimeDeps = request.app.state.runtime
    return runtime


async def app_sessionmaker(request: Request) -> async_sessionmaker[AsyncSession]:
    sessionmaker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    return sessionmaker


RuntimeDep = Annotated[RuntimeDeps, Depends(app_runtime)]
SessionmakerDep = Annotated[async_sessionmaker[AsyncSession], Depends(app_sessionmaker)]
Transaction = Callable[[], AbstractAsyncContextManager[AsyncSession]]


def transaction_in(sessionmaker: async_sessionmaker[AsyncSession], caller: Caller) -> Transaction:
    """Transactions in the caller's organization (the REST routes' and the console's)."""
    return partial(transaction, sessionmaker, caller.organization_id)


async def _transaction(sessionmaker: SessionmakerDep, caller: CallerDep) -> Transaction:
    return transaction_in(sessionmaker, caller)


async def _reading(sessionmaker: SessionmakerDep, caller: CallerDep) -> Transaction:
    return partial(reading, sessionmaker, caller.organization_id)


# `async with tx() as session:` — one transaction in the caller's organization, committed before the
# response is built.
TransactionDep = Annotated[Transaction, Depends(_transaction)]
# `async with read() as session:` — reads only, in the caller's organization, without a transaction
# (two round trips fewer): for routes whose whole path only reads (db/uow.py `reading` refuses writes).
ReadDep = Annotated[Transaction, Depends(_reading)]
AgentId = Annotated[str, Path(pattern=id_pattern("agent"), description="agent-<uuid4>")]
BlockId = Annotated[str, Path(pattern=id_pattern("block"), description="block-<uuid4>")]


# ASCII digits only: str.isdigit() also accepts "²" or "٣", which int() then refuses.
_VERSION = re.compile(r"[0-9]{1,10}")


async def _if_match(if_match: Annotated[str | None, Header(description='Expected block version, e.g. "3"')] = None) -> int | None:
    if if_match is None or if_match.strip() == "*":
        return None
    token = if_match.strip().removeprefix("W/").strip('"')
    if _VERSION.fullmatch(token) is None or int(token) > MAX_VERSION:
        raise InvalidInput(f'If-Match must be a block version or the ETag this server sent, e.g. "3" (got {if_match!r}).')
    return int(token)


IfMatchDep = Annotated[int | None, Depends(_if_match)]
# Block history pages (by block id and by an agent's label).
VersionBound = Annotated[
    int | None, Query(ge=0, le=MAX_VERSION, description="A version: entries below (before) or above (after) it.")
]


async def _history_page(
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    before: VersionBound = None,
    after: VersionBound = None,
    format: Annotated[Literal["full", "diff"], Query(description="diff: the value as a unified diff")] = "full",
) -> HistoryPage:
    return HistoryPage(limit=limit, before=before, after=after, as_diff=format == "diff")


HistoryPageDep = Annotated[HistoryPage, Depends(_history_page)]


def page_params(default_limit: int, default_order: Literal["asc", "desc"]) -> Callable[..., Awaitable[PageRequest]]:
    async def dependency(
        before: str | None = Query(None, description="Return items before this id (in listing order)."),
        after: str | None = Query(None, description="Return items after this id (in listing order)."),
        limit: int = Query(default_limit, ge=1, le=1000),
        order: Literal["asc", "desc"] = Query(default_order, description="By creation time."),
    ) -> PageRequest:
        return PageRequest(limit=limit, order=order, before=before, after=after)

    return dependency


def included_relations(request: Request, include: list[str] | None) -> set[str] | None:
    """Letta semantics: v1 SDK clients (they send X-Stainless-Package-Version) get only the
    relations they ask for via include[]; other clients get everything unless they ask."""
    names = {name for value in include or () for name in value.split(",") if name}
    if names:
        return names
    return set() if "x-stainless-package-version" in request.headers else None


class Versioned(Protocol):
    @property
    def version(self) -> int: ...


VersionedView = TypeVar("VersionedView", bound=Versioned)


def with_etag(response: Response, view: VersionedView) -> VersionedView:
    """Returns the view, with its version as the response's ETag (what If-Match is checked against)."""
    response.headers["ETag"] = f'"{view.version}"'
    return view
