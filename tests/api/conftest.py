"""Fixtures of the API tests beyond tests/conftest.py's."""

from collections.abc import AsyncIterator

import httpx
import pytest

from memvm.config import Settings
from tests.support.api import keyed_client


@pytest.fixture
async def keyed(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, list[dict[str, str]]]]:
    """The app with access control on, and the request headers of a key of organizations `a` and `b`."""
    async with keyed_client(settings, "a", "b") as client_and_keys:
        yield client_and_keys
