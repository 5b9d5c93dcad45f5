"""The command line of one sandboxed call: `prlimit` sets the resource limits (everything after it
inherits them), bubblewrap builds the jail (not in "process" mode), `setpriv` becomes the call's own
uid when the server is root, then `python -I` runs the bootstrap. Nothing from the server's
environment reaches the command: variables travel in the request on stdin, so not even the launcher
sees them.

As root, bubblewrap runs with root's rights and setpriv inside the jail, after it: the trees the jail
binds (the interpreter, a tool's venv) may then lie under a directory only root may enter, as pyenv,
conda and uv install Python in root's home. Bubblewrap started as the call's uid could not reach them;
the tool itself never holds root's rights either way."""

import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memvm.config import Settings
from memvm.sandbox.launchers import Launchers

BOOTSTRAP = (Path(__file__).parent / "bootstrap.py").read_text(encoding="utf-8")
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
# What a Python program may need from /etc; nothing that describes this server.
_ETC_FILES = ("/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/localtime")
# The host's system trees, bound whole by every jail (or linked to /usr where /usr is merged).
_SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
# What bubblewrap keeps, as root, for setpriv to drop: its uid and gid, and the bounding set.
_SETPRIV_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int
    memory_bytes: int
    processes: int
    tmp_bytes: int  # the private /tmp's size, and so the largest file a call can write

    @classmethod
    def of(cls, settings: Settings) -> "Limits":
        return cls(
            cpu_seconds=max(1, int(settings.tool_timeout_seconds) + 1),
            memory_bytes=settings.tool_memory_mb * 1024 * 1024,
            processes=settings.tool_max_processes,
            tmp_bytes=settings.tool_tmp_mb * 1024 * 1024,
        )


def base_interpreter() -> str:
    """The runtime's own interpreter, not the server's venv; started with -S (see `interpreter`)
    tools see the standard library only, plus what their own `pip_requirements` venv adds."""
    return os.path.realpath(sys.executable)


def launch(
    launchers: Launchers,
    limits: Limits,
    python: str,
    *,
    switch: list[str],
    processes: int,
    network: bool,
    binds: Sequence[str] = (),
    clearenv: bool = True,
) -> list[str]:
    """The programs in front of the interpreter, in the order they run; `switch` is setpriv's command
    prefix, empty when calls keep the server's uid. `binds` and `clearenv`: see `bubblewrap`."""
    argv = prlimit(launchers.prlimit, limits, processes)
    if launchers.bwrap is not None:
        setpriv = launchers.setpriv if switch else None
        argv += bubblewrap(launchers.bwrap.path, limits, python, setpriv=setpriv, network=network, binds=binds, clearenv=clearenv)
    return [*argv, *switch]


def prlimit(program: str, limits: Limits, processes: int) -> list[str]:
    return [
        program,
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_bytes}",
        f"--nproc={processes}",
        f"--fsize={limits.tmp_bytes}",
        "--core=0",
        "--",
    ]


def bubblewrap(
    program: str,
    limits: Limits,
    python: str,
    *,
    setpriv: str | None,
    network: bool,
    binds: Sequence[str] = (),
    clearenv: bool = True,
) -> list[str]:
    """No namespaces shared but the network when asked; a read-only system and interpreter (and
    setpriv, which runs in the jail as root, and `binds`, more read-only paths); a private,
    size-capped /tmp any uid may write as the working directory; killed with the server. Ends with
    `--`. `clearenv=False` keeps the environment the launcher was given: a long-lived server's
    variables travel there, never on a command line that any process may read."""
    as_root = setpriv is not None
    argv = [program, *_namespaces(as_root=as_root, network=network), "--die-with-parent", "--new-session"]
    argv += ["--clearenv"] if clearenv else []
    # /tmp first: a tree bound below it (a venv under a data dir in /tmp) must land on top of it.
    tmp = ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp", "--chdir", "/tmp"]
    argv += ["--proc", "/proc", "--dev", "/dev", *tmp]
    argv += _system_mounts()
    argv += _binds([*interpreter_trees(python), *([setpriv] if setpriv else []), *binds])
    for path in _ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    return [*argv, "--"]


def interpreter(python: str) -> list[str]:
    """-I: no user site, no PYTHON* variables. -S on the bare runtime: its site-packages (the
    server's own packages) stay out of reach, and skipping `site` halves the start-up. A venv
    needs `site` to find its own packages, and has nothing of the server's to hide."""
    in_venv = (Path(python).parent.parent / "pyvenv.cfg").exists()
    return [python, "-I", "-c", BOOTSTRAP] if in_venv else [python, "-I", "-S", "-c", BOOTSTRAP]


def closed_directory(python: str) -> str | None:
    """The first directory on the way to the interpreter's files that only its owner (and group) may
    enter, if any: a call that switches to its own uid without a jail cannot start from there."""
    directories = {*Path(os.path.realpath(python)).parents}
    for tree in interpreter_trees(python):
        directories.update([Path(tree), *Path(tree).parents])
    for directory in sorted(directories):  # a parent sorts before what it holds
        if not directory.stat().st_mode & stat.S_IXOTH:
            return str(directory)
    return None


def _namespaces(*, as_root: bool, network: bool) -> list[str]:
    """As root, no user namespace: bubblewrap builds the jail with root's rights (a user namespace
    would map the call's uid to root) and keeps only what setpriv needs to drop them all. Otherwise a
    user namespace is what gives bubblewrap its rights."""
    argv = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    argv += [] if network else ["--unshare-net"]
    if as_root:
        return [*argv, "--cap-drop", "ALL", *(arg for cap in _SETPRIV_CAPS for arg in ("--cap-add", cap))]
    return [*argv, "--unshare-user"]


def _system_mounts() -> list[str]:
    """/usr read-only, and the merged-/usr links (/bin → usr/bin …) as the host has them."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_TREES[1:]:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    return argv


def _binds(paths: list[str]) -> list[str]:
    """Each path read-only at its own place, below directories the jail makes (mode 0755): the host's
    own modes on the way, such as a home directory's 0700, stay outside."""
    wanted = {path for path in paths if not _is_system(path)}
    # A path inside another one is bound with it (and a directory made inside a read-only bind fails).
    outside = sorted(path for path in wanted if not any(path.startswith(other + "/") for other in wanted))
    parents = {str(parent) for path in outside for parent in Path(path).parents}
    made = sorted(parent for parent in parents if parent not in ("/", "/tmp") and not _is_system(parent))
    argv = [arg for directory in made for arg in ("--perms", "0755", "--dir", directory)]
    return argv + [arg for path in outside for arg in ("--ro-bind", path, path)]


def _is_system(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in _SYSTEM_TREES)


def interpreter_trees(python: str) -> list[str]:
    """The installation trees the interpreter needs: the base runtime's prefix, and the venv's when a
    tool has requirements."""
    trees = {os.path.realpath(sys.base_prefix)}
    venv = Path(python).parent.parent
    if (venv / "pyvenv.cfg").exists():
        trees.add(str(venv))
    return sorted(trees)
