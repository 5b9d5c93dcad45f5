"""The command line of one sandboxed call: `prlimit` sets the resource limits, then bubblewrap
builds the jail (or, in "process" mode, the interpreter runs directly), then `python -I` runs the
bootstrap. Nothing from the server's environment reaches the command: variables travel in the
request on stdin, so not even the launcher sees them."""

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from memvm.config import Settings

BOOTSTRAP = (Path(__file__).parent / "bootstrap.py").read_text(encoding="utf-8")
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
# What a Python program may need from /etc; nothing that describes this server.
_ETC_FILES = ("/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/localtime")


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


def prlimit(limits: Limits, processes: int) -> list[str]:
    return [
        "prlimit",
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_bytes}",
        f"--nproc={processes}",
        f"--fsize={limits.tmp_bytes}",
        "--core=0",
        "--",
    ]


def bubblewrap(limits: Limits, python: str, *, network: bool) -> list[str]:
    """No namespaces shared but the network when asked; a read-only system and interpreter; a
    private, size-capped /tmp as the working directory; killed with the server."""
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    if network:
        argv.append("--share-net")
    # /tmp first: a tree bound below it (a venv under a data dir in /tmp) must land on top of it.
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp", "--chdir", "/tmp"]
    argv += _system_mounts()
    for tree in _interpreter_trees(python):
        argv += ["--ro-bind", tree, tree]
    for path in _ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    return [*argv, "--", *interpreter(python)]


def interpreter(python: str) -> list[str]:
    """-I: no user site, no PYTHON* variables. -S on the bare runtime: its site-packages (the
    server's own packages) stay out of reach, and skipping `site` halves the start-up. A venv
    needs `site` to find its own packages, and has nothing of the server's to hide."""
    in_venv = (Path(python).parent.parent / "pyvenv.cfg").exists()
    return [python, "-I", "-c", BOOTSTRAP] if in_venv else [python, "-I", "-S", "-c", BOOTSTRAP]


def _system_mounts() -> list[str]:
    """/usr read-only, and the merged-/usr links (/bin → usr/bin …) as the host has them."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    return argv


def _interpreter_trees(python: str) -> list[str]:
    """The installation trees the interpreter needs that /usr does not already hold: the base
    runtime's prefix, and the venv's when a tool has requirements."""
    trees = {os.path.realpath(sys.base_prefix)}
    venv = Path(python).parent.parent
    if (venv / "pyvenv.cfg").exists():
        trees.add(str(venv))
    return sorted(tree for tree in trees if not tree.startswith("/usr/"))
