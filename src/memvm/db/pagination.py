"""Cursor pagination as the Letta API does it: `before`/`after` are item ids, ordered by (created_at, id)."""

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from memvm.errors import NotFound


@dataclass(frozen=True)
class PageRequest:
    limit: int
    order: Literal["asc", "desc"] = "desc"
    before: str | None = None  # items that come before this id in the listing order
    after: str | None = None  # items that come after this id in the listing order


async def fetch_page(session: AsyncSession, query: Select[Any], model: Any, page: PageRequest) -> list[Any]:
    """Run `query` (selecting `model`) restricted to one page; rows come back in listing order."""
    key = tuple_(model.created_at, model.id)
    ascending = page.order == "asc"
    if page.after is not None:
        cursor = await _cursor(session, model, page.after, "after")
        query = query.where(key > cursor if ascending else key < cursor)
    if page.before is not None:
        cursor = await _cursor(session, model, page.before, "before")
        query = query.where(key < cursor if ascending else key > cursor)
    # With only `before`, take the items nearest the cursor, then restore listing order.
    backwards = page.before is not None and page.after is None
    forward_asc = ascending != backwards
    order = (model.created_at.asc(), model.id.asc()) if forward_asc else (model.created_at.desc(), model.id.desc())
    rows = list(await session.scalars(query.order_by(*order).limit(page.limit)))
    return rows[::-1] if backwards else rows


async def _cursor(session: AsyncSession, model: Any, item_id: str, name: str) -> Any:
    row = (await session.execute(select(model.created_at, model.id).where(model.id == item_id))).first()
    if row is None:
        raise NotFound(f"Cursor {name}={item_id!r} does not match any item; pass the id of an item from a previous page.")
    return tuple_(row.created_at, row.id)


def page_of(items: list[Any], page: PageRequest) -> list[Any]:
    """The same cursor semantics over an already ordered (ascending) in-memory list of items with `id`."""
    ordered = items if page.order == "asc" else items[::-1]
    ids = [item.id for item in ordered]
    for name, cursor in (("after", page.after), ("before", page.before)):
        if cursor is not None and cursor not in ids:
            raise NotFound(f"Cursor {name}={cursor!r} does not match any item; pass the id of an item from a previous page.")
    start = ids.index(page.after) + 1 if page.after is not None else 0
    stop = ids.index(page.before) if page.before is not None else len(ordered)
    window = ordered[start:stop]
    backwards = page.before is not None and page.after is None
    return window[-page.limit :] if backwards else window[: page.limit]


@dataclass(frozen=True)
class NamePage:
    """A page of names (tags) rather than objects: cursors are names, in code-point order."""

    limit: int
    order: Literal["asc", "desc"] = "asc"
    after: str | None = None  # names that come after this one in the listing order
    before: str | None = None
    contains: str | None = None  # only names that contain this text, in any case


async def fetch_names(
    session: AsyncSession, names: ColumnElement[list[str]] | InstrumentedAttribute[list[str]], page: NamePage
) -> list[str]:
    """One page of the distinct elements of a text-array column (`names`), in code-point order
    (COLLATE "C", as Python sorts them) whatever the database's collation."""
    every = select(func.unnest(names).label("name")).subquery()
    query = select(every.c.name.collate("C").label("name")).distinct()
    if page.contains:
        query = query.where(every.c.name.icontains(page.contains, autoescape=True))
    name = every.c.name.collate("C")
    ascending = page.order == "asc"
    if page.after is not None:
        query = query.where(name > page.after if ascending else name < page.after)
    if page.before is not None:
        query = query.where(name < page.before if ascending else name > page.before)
    return list(await session.scalars(query.order_by(name.asc() if ascending else name.desc()).limit(page.limit)))
