"""Date filters as tools and the API accept them: ISO dates or datetimes."""

from datetime import datetime, time
from zoneinfo import ZoneInfo

from memvm.errors import InvalidInput


def parse_bound(text: str | None, name: str, *, end: bool, timezone: str = "UTC") -> datetime | None:
    """None (no bound) for a missing or empty value. A bare date covers that whole day (an end date
    means its last instant); values without a zone are read in `timezone` (the agent's)."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"Invalid {name} {text!r}: use ISO 8601, e.g. 2025-01-31 or 2025-01-31T14:30.") from None
    if end and len(text.strip()) == 10:
        parsed = datetime.combine(parsed.date(), time.max)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=ZoneInfo(timezone))
