"""Search over an agent's whole conversation history (recall memory)."""

from collections.abc import Sequence
from datetime import UTC, datetime, time

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.errors import InvalidInput
from memvm.orm import Message


async def search_history(
    session: AsyncSession,
    agent_id: str,
    *,
    query: str,
    roles: Sequence[str] | None,
    limit: int,
    start_date: str | None,
    end_date: str | None,
) -> list[Message]:
    """Full-text match, best first; dates are ISO dates or datetimes (a bare end date covers that whole day)."""
    document = func.to_tsvector("english", func.coalesce(Message.content, ""))
    terms = func.websearch_to_tsquery("english", query)
    statement = select(Message).where(Message.agent_id == agent_id, Message.kind == "message", document.op("@@")(terms))
    if roles:
        statement = statement.where(Message.role.in_(list(roles)))
    if start_date:
        statement = statement.where(Message.created_at >= parse_date(start_date, "start_date", end_of_day=False))
    if end_date:
        statement = statement.where(Message.created_at <= parse_date(end_date, "end_date", end_of_day=True))
    ranked = statement.order_by(func.ts_rank_cd(document, terms).desc(), Message.seq.desc()).limit(limit)
    return list(await session.scalars(ranked))


def parse_date(text: str, name: str, *, end_of_day: bool) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"Invalid {name} {text!r}: use ISO 8601, e.g. 2025-01-31 or 2025-01-31T14:30.") from None
    if len(text) == 10 and end_of_day:
        parsed = datetime.combine(parsed.date(), time.max)
    # Dates without a zone are read as UTC.
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
