"""The PostgreSQL server of a data directory, as its `postmaster.pid` lock file describes it: which
postmaster serves the directory, whether a killed one is still on its way out, and stopping
whichever one serves it (not only the one this process started).

PostgreSQL writes the lock file as: pid, data dir, start time, port, socket dir, listen addresses,
shared memory key and id, status; one per line.
"""

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("memvm")

LOCK_FILE = "postmaster.pid"
PREVIOUS_EXIT_SECONDS = 30.0  # a killed postmaster's backends notice within milliseconds; a wedged one never does
STOP_SECONDS = 30
_POLL_SECONDS = 0.05


class EmbeddedPostgresError(RuntimeError):
    """The embedded PostgreSQL could not be started; the message says why and where to look."""


@dataclass(frozen=True)
class LockFile:
    pid: int
    text: str  # the whole file, to remove it only if nothing rewrote it meanwhile
    socket_dir: str
    port: str
    shmem_id: int | None
    status: str


def read_lock_file(pg_dir: Path) -> LockFile | None:
    try:
        text = (pg_dir / LOCK_FILE).read_text()
        lines = [line.strip() for line in text.splitlines()]
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return None  # absent, or being written by a postmaster that is starting
    field = dict(enumerate(lines))
    shmem = field.get(6, "").split()
    return LockFile(
        pid=pid,
        text=text,
        socket_dir=field.get(4, ""),
        port=field.get(3, ""),
        shmem_id=int(shmem[1]) if len(shmem) == 2 and shmem[1].isdigit() else None,
        status=field.get(7, ""),
    )


def serving_pid(pg_dir: Path) -> int | None:
    """The pid of the postmaster serving `pg_dir`, if one runs (a lock file left by a crash, or
    naming a zombie, does not count)."""
    lock = read_lock_file(pg_dir)
    return lock.pid if lock is not None and _live_postgres(lock.pid) else None


def wait_for_previous_postmaster(pg_dir: Path, timeout: float = PREVIOUS_EXIT_SECONDS) -> None:
    """Before starting or reusing the server on `pg_dir`: return once a postmaster there is ready,
    or the lock file is gone or stale.

    After a kill -9 the postmaster may linger as a zombie until it is reaped, and its backends
    take a moment to notice and exit. PostgreSQL refuses to start while any of them holds its
    shared memory, and takes a zombie's lock file for a live server's (its pid still answers
    kill(pid, 0)). So wait, bounded and saying so once, for the shared memory to be free, then
    remove the lock files as PostgreSQL would remove a stale one."""
    deadline, said = time.monotonic() + timeout, False
    while (lock := read_lock_file(pg_dir)) is not None:
        if _live_postgres(lock.pid):
            if lock.status == "ready":
                return
            waiting_for = f"PostgreSQL (pid {lock.pid}) on {pg_dir} to finish {lock.status or 'starting'}"
        elif _attached_processes(lock.shmem_id) == 0:
            _remove_stale_lock_files(pg_dir, lock)
            return
        else:
            waiting_for = f"the previous PostgreSQL (pid {lock.pid}) on {pg_dir} to finish exiting"
        if not said:
            log.info("waiting up to %.0f s for %s", timeout, waiting_for)
            said = True
        if time.monotonic() > deadline:
            raise EmbeddedPostgresError(f"gave up after {timeout:.0f} s waiting for {waiting_for}; stop it, then start again")
        time.sleep(_POLL_SECONDS)


def stop_serving_postmaster(pg_dir: Path, timeout: float = STOP_SECONDS) -> None:
    """Stop whichever postmaster serves `pg_dir`, also one restarted from outside since this process
    started it: a fast shutdown (SIGINT, as `pg_ctl stop -m fast` sends), then an immediate one
    (SIGQUIT) if it is not done within `timeout`."""
    if (pid := serving_pid(pg_dir)) is None:
        return
    for signum in (signal.SIGINT, signal.SIGQUIT):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        deadline = time.monotonic() + timeout
        while running(pid) and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
        if not running(pid):
            return
        log.warning("the embedded PostgreSQL (pid %d) on %s did not stop within %.0f s of %s", pid, pg_dir, timeout, signum.name)


def _live_postgres(pid: int) -> bool:
    """A running postgres process at `pid`, not another program that reused the pid."""
    return running(pid) and _process_name(pid) in ("postgres", None)


def running(pid: int) -> bool:
    """Whether `pid` is a running process: not gone, not a zombie (without /proc, as PostgreSQL
    itself judges: the pid answers kill(pid, 0))."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's (the embedded server's own when memvm runs as root)
    stat = _proc_stat(pid)
    return stat is None or stat[1] not in ("Z", "X")


def _process_name(pid: int) -> str | None:
    stat = _proc_stat(pid)
    return None if stat is None else stat[0]


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(name, state) from /proc/<pid>/stat; None without /proc. A process gone meanwhile reads as dead ("X")."""
    if not Path("/proc/self").is_dir():
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", "X"
    return stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :][:1]


def _attached_processes(shmem_id: int | None) -> int:
    """How many processes are attached to the server's System V shared memory segment: PostgreSQL's
    own test for whether a previous server's processes are still around (0 when unknown)."""
    if shmem_id is None:
        return 0
    try:
        rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return 0
    for row in rows:
        columns = row.split()  # key shmid perms size cpid lpid nattch ...
        if len(columns) > 6 and columns[1] == str(shmem_id):
            return int(columns[6])
    return 0


def _remove_stale_lock_files(pg_dir: Path, lock: LockFile) -> None:
    """postmaster.pid, and the socket's lock file naming the same pid, if nothing rewrote them."""
    if read_lock_file(pg_dir) != lock:
        return
    log.info("removing the lock file of the PostgreSQL (pid %d) that ran on %s; it is gone", lock.pid, pg_dir)
    (pg_dir / LOCK_FILE).unlink(missing_ok=True)
    if lock.socket_dir and lock.port:
        socket_lock = Path(lock.socket_dir) / f".s.PGSQL.{lock.port}.lock"
        with contextlib.suppress(OSError):
            if socket_lock.read_text().split("\n", 1)[0].strip() == str(lock.pid):
                socket_lock.unlink()
