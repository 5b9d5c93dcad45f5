from dataclasses import dataclass

import pytest

from memvm.db.pagination import PageRequest, page_of
from memvm.errors import NotFound


@dataclass
class Item:
    id: str


ITEMS = [Item(name) for name in "abcde"]


def ids(items):
    return "".join(item.id for item in items)


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (PageRequest(limit=2, order="asc"), "ab"),
        (PageRequest(limit=2, order="asc", after="b"), "cd"),
        (PageRequest(limit=2, order="asc", after="e"), ""),
        (PageRequest(limit=2, order="asc", before="d"), "bc"),
        (PageRequest(limit=10, order="asc", after="a", before="d"), "bc"),
        (PageRequest(limit=2, order="desc"), "ed"),
        (PageRequest(limit=2, order="desc", after="d"), "cb"),
        (PageRequest(limit=2, order="desc", before="b"), "dc"),
    ],
)
def test_page_of_follows_cursor_semantics(page, expected):
    assert ids(page_of(ITEMS, page)) == expected


def test_page_of_unknown_cursor_is_not_found():
    with pytest.raises(NotFound, match="after='zz'"):
        page_of(ITEMS, PageRequest(limit=2, after="zz"))
