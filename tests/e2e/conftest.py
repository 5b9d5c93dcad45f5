"""Fixtures of the end-to-end tests."""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data dir (not yet made) for `memvm serve` with its embedded PostgreSQL. When the tests run as
    root, that server runs as a system user of its own, which must enter every directory above the
    data dir, and memvm opens none of them: so not in pytest's private (0700) temp tree, and below a
    temp dir of the test's own that the test opens."""
    parent = Path(tempfile.mkdtemp(prefix="memvm-e2e-"))
    parent.chmod(0o755)
    yield parent / "data"
    shutil.rmtree(parent, ignore_errors=True)
