"""Organization scoping, applied by the session itself rather than by each query.

Every unit of work names its organization (db/uow.py). Then:
- every ORM SELECT, UPDATE and DELETE gets `organization_id = <org>` for each TenantOwned table it
  touches (joins and subqueries included), and sees shared rows (organization NULL) of
  SharedOrTenantOwned tables besides its own;
- every new row of those tables is stamped with the organization.
A session that names no organization may not touch tenant rows at all: forgetting to scope is an
error, not a silent read of every tenant. Internal jobs that work across organizations (the
embedding queue, syncing built-in tools) say so with ALL_ORGANIZATIONS.

A TenantOwned row's ORM identity starts with its organization (db/base.py): `owned` looks one up
by the rest of its key.

The filter runs before every statement, so it is built to cost little there (see `scoped_to`).
"""

import weakref
from functools import lru_cache
from typing import Any, Final, TypeVar

from sqlalchemy import Executable, event, or_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import ORMExecuteState, Session, with_loader_criteria
from sqlalchemy.orm.util import LoaderCriteriaOption

from memvm.db.base import SharedOrTenantOwned, TenantOwned

ALL_ORGANIZATIONS: Final = "*"  # internal jobs only: no organization filter
_KEY = "organization_id"


class UnscopedSession(RuntimeError):
    """A session touched tenant rows without naming its organization (a bug in memvm)."""


class TenantSession(Session):
    """The session class of every memvm unit of work (see db/engine.py)."""


def scope(session: Session, organization_id: str) -> None:
    session.info[_KEY] = organization_id


def organization_of(session: Session) -> str:
    """The organization this session works in."""
    organization_id = session.info.get(_KEY)
    if organization_id is None:
        raise UnscopedSession("this session names no organization; open it with transaction(..., organization_id)")
    return str(organization_id)


_Owned = TypeVar("_Owned", bound=TenantOwned)


async def owned(session: AsyncSession, model: type[_Owned], *key: Any) -> _Owned | None:
    """`session.get` of a row of the session's organization by the rest of its primary key:
    `owned(session, AgentBlock, agent_id, block_id)`."""
    organization_id = organization_of(session.sync_session)
    if organization_id == ALL_ORGANIZATIONS:
        raise UnscopedSession(
            f"a {model.__name__} is known by its organization and id; a job across organizations has no organization"
            " to look it up in: query by the organization of the rows it claimed, or open a transaction in it"
        )
    return await session.get(model, (organization_id, *key))


@event.listens_for(TenantSession, "do_orm_execute")
def _filter_queries(state: ORMExecuteState) -> None:
    if not (state.is_select or state.is_update or state.is_delete) or state.is_column_load or state.is_relationship_load:
        return
    organization_id = organization_of(state.session)
    if organization_id == ALL_ORGANIZATIONS:
        return
    state.statement = scoped_to(state.statement, organization_id)


# How many organizations' copies of one statement are kept; past that they are dropped and made again.
_ORGANIZATIONS_PER_STATEMENT: Final = 64
# Each statement's copies scoped to an organization, by organization; an entry goes with its statement.
_scoped_copies: weakref.WeakKeyDictionary[Executable, dict[str, Executable]] = weakref.WeakKeyDictionary()


def scoped_to(statement: Executable, organization_id: str) -> Executable:
    """The statement with the organization's criteria. A statement built once (a repository's
    constant) is scoped once per organization: SQLAlchemy memoizes a statement's cache key, and a
    fresh copy per execution computed the whole key again. Copies are kept per organization, so
    one organization's copy never serves another's statement."""
    copies = _scoped_copies.get(statement)
    if copies is None:
        copies = _scoped_copies[statement] = {}
    scoped = copies.get(organization_id)
    if scoped is None:
        if len(copies) >= _ORGANIZATIONS_PER_STATEMENT:
            copies.clear()
        scoped = copies[organization_id] = statement.options(*_criteria(organization_id))
    return scoped


@lru_cache(maxsize=1024)
def _criteria(organization_id: str) -> tuple[LoaderCriteriaOption, LoaderCriteriaOption]:
    """The options that scope a statement to the organization, built once per organization: building
    them analyses their lambdas, which cost more than the rest of the filter. Each organization's
    lambdas capture its own id; SQLAlchemy sends it as a bound parameter of the statement."""
    return (
        with_loader_criteria(TenantOwned, lambda cls: cls.organization_id == organization_id, include_aliases=True),
        with_loader_criteria(
            SharedOrTenantOwned,
            lambda cls: or_(cls.organization_id == organization_id, cls.organization_id.is_(None)),
            include_aliases=True,
        ),
    )


def organization_of_new_rows(session: Session, kind: str) -> str:
    """The organization a new row of `kind` (a tenant table's model name) is stamped with: the
    session's. Statements that insert outside the ORM's flush stamp their rows with it."""
    organization_id = organization_of(session)
    if organization_id == ALL_ORGANIZATIONS:
        raise UnscopedSession(f"a new {kind} needs an organization; internal jobs cannot create one")
    return organization_id


@event.listens_for(TenantSession, "before_flush")
def _stamp_new_rows(session: Session, flush_context: Any, instances: Any) -> None:
    for row in session.new:
        if isinstance(row, TenantOwned | SharedOrTenantOwned) and getattr(row, _KEY, None) is None:
            row.organization_id = organization_of_new_rows(session, type(row).__name__)
