"""The command line of a long-lived MCP server (the stdio kind) in the tool sandbox: the jail of a
custom tool call (command.py) with a server's own limits and uid, and read-only binds of what its
command needs: the base interpreter's trees (a Python server may run on memvm's own Python and its
site-packages), the command itself and its installation prefix, and the paths its arguments name.

A server's uid comes from a range of its own, above the per-call slots of identities.py, and is the
same for a server id every time: a long-lived server never holds a slot that tool calls wait for.
Its variables travel in the launcher's environment (bubblewrap keeps it), never on a command line,
which any process of the host may read; memvm's own environment never reaches it."""

import hashlib
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memvm.config import Settings
from memvm.sandbox import command
from memvm.sandbox.identities import Identity
from memvm.sandbox.launchers import Launchers

_UID_OFFSET = 100_000  # above every per-call slot: tool_concurrency is far smaller
_UID_SLOTS = 10_000


class ServerCommandMissing(Exception):
    """The command is not an executable on memvm's PATH, or names what the jail will not show."""


@dataclass(frozen=True)
class ServerLaunch:
    argv: list[str]
    env: dict[str, str]
    uid: int | None  # who the server runs as; None: memvm's own uid


def server_launch(
    launchers: Launchers,
    settings: Settings,
    *,
    server_id: str,
    program: str,
    args: Sequence[str],
    env: Mapping[str, str],
    network: bool,
) -> ServerLaunch:
    """prlimit, bubblewrap (not in "process" mode) and setpriv (as root) in front of the command."""
    executable = resolve(program)
    uid = server_uid(settings, server_id) if launchers.setpriv is not None else None
    identity = Identity(uid, settings.tool_max_processes)
    prefix = command.launch(
        launchers,
        server_limits(settings),
        command.base_interpreter(),
        switch=identity.switch(launchers.setpriv),
        processes=identity.processes(),
        network=network,
        binds=server_binds(executable, args, data_dir=settings.data_dir),
        clearenv=False,
    )
    return ServerLaunch([*prefix, executable, *args], {**command.BASE_ENV, **env}, uid)


def server_limits(settings: Settings) -> command.Limits:
    """A server lives for hours: its CPU limit is cumulative, its memory its own."""
    return command.Limits(
        cpu_seconds=settings.mcp_cpu_seconds,
        memory_bytes=settings.mcp_memory_mb * 1024 * 1024,
        processes=settings.tool_max_processes,
        tmp_bytes=settings.tool_tmp_mb * 1024 * 1024,
    )


def server_uid(settings: Settings, server_id: str) -> int:
    """Stable across restarts (a hash of the id, not Python's salted `hash`)."""
    digest = int.from_bytes(hashlib.sha256(server_id.encode()).digest()[:8], "big")
    return settings.tool_sandbox_first_uid + _UID_OFFSET + digest % _UID_SLOTS


def resolve(program: str) -> str:
    """The real file the command names, found on memvm's PATH (a jail has no PATH of its own)."""
    found = shutil.which(program)
    if found is None:
        raise ServerCommandMissing(f"the command {program!r} is not an executable on the server's PATH")
    return os.path.realpath(found)


def server_binds(executable: str, args: Sequence[str], *, data_dir: Path) -> list[str]:
    """The command, its installation prefix (the parent of its bin/), and each absolute path an
    argument names that exists: a file's directory, a directory itself. Only what every user of the
    host may read, and nothing of memvm's data directory: a server runs as memvm's own uid unless
    memvm is root, and must not see memvm's files through its arguments. The base interpreter's
    trees are bound anyway (command.py), wherever they are."""
    trees = [Path(tree) for tree in command.interpreter_trees(command.base_interpreter())]
    binds = [] if _inside(Path(executable), trees) else [_shown(executable, data_dir, "the command")]
    prefix = Path(executable).parent.parent
    if Path(executable).parent.name == "bin" and not _inside(prefix, trees) and _public(prefix, data_dir):
        binds.append(str(prefix))
    for arg in args:
        if os.path.isabs(arg) and os.path.exists(arg):
            path = os.path.realpath(arg)
            binds.append(_shown(path if os.path.isdir(path) else os.path.dirname(path), data_dir, f"argument {arg!r}"))
    return [path for path in binds if path != "/"]


def _shown(path: str, data_dir: Path, what: str) -> str:
    if not _public(Path(path), data_dir):
        raise ServerCommandMissing(
            f"{what} names {path}, which a stdio server may not see: only what every user of the host may read, "
            "outside memvm's data directory, is shown in its sandbox"
        )
    return path


def _public(path: Path, data_dir: Path) -> bool:
    """Every user may reach and read it (o+x on each directory above, o+r on it, o+x on a directory),
    and it is not memvm's data directory, in it, or above it."""
    data = Path(os.path.realpath(data_dir))
    if _inside(path, [data]) or _inside(data, [path]):
        return False
    try:
        if any(not parent.stat().st_mode & stat.S_IXOTH for parent in path.parents):
            return False
        mode = path.stat().st_mode
    except OSError:
        return False
    wanted = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & wanted == wanted


def _inside(path: Path, trees: Sequence[Path]) -> bool:
    return any(path == tree or tree in path.parents for tree in trees)
