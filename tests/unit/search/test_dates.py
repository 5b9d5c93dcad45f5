from datetime import datetime, time
from zoneinfo import ZoneInfo

import pytest

from memvm.errors import InvalidInput
from memvm.search.dates import parse_bound


def test_a_missing_or_empty_bound_is_no_bound():
    assert parse_bound(None, "start_date", end=False) is None
    assert parse_bound("", "end_date", end=True) is None


def test_a_bare_end_date_covers_its_whole_day_in_the_agents_zone():
    end = parse_bound("2025-01-31", "end_date", end=True, timezone="Europe/Lisbon")
    assert end == datetime.combine(datetime(2025, 1, 31).date(), time.max, tzinfo=ZoneInfo("Europe/Lisbon"))
    start = parse_bound("2025-01-31", "start_date", end=False, timezone="Europe/Lisbon")
    assert start == datetime(2025, 1, 31, tzinfo=ZoneInfo("Europe/Lisbon"))


def test_an_explicit_zone_wins_and_garbage_is_refused_with_the_field_name():
    assert parse_bound("2025-01-31T10:00+02:00", "start_date", end=False, timezone="UTC").utcoffset().total_seconds() == 7200
    with pytest.raises(InvalidInput, match="start_date"):
        parse_bound("yesterday", "start_date", end=False)
