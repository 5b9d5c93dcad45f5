"""Running the real `memvm` console script as a child process, spoken to over loopback TCP.

Every wait is bounded, every started process is stopped in a `finally` (SIGINT, then SIGKILL),
and each server's combined stdout+stderr goes to a file so failures can show it.
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from memvm import __version__

HEALTH_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def memvm_command(*args: str) -> list[str]:
    """The installed `memvm` console script next to this interpreter, else `python -m memvm.cli`."""
    script = Path(sys.executable).with_name("memvm")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), *args]
    return [sys.executable, "-m", "memvm.cli", *args]


CLI_TIMEOUT = 60.0


def memvm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run one `memvm` command to its end, with its output captured as text."""
    return subprocess.run(
        memvm_command(*args), env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLI_TIMEOUT
    )


def child_env(**memvm_settings: str) -> dict[str, str]:
    """This environment without any MEMVM_* variable, plus the given ones."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMVM_")}
    env["PYTHONUNBUFFERED"] = "1"
    # One process unless a test asks for more: `memvm serve` defaults to one HTTP process per core and
    # an embedding worker process beside them, forked after the server's imports (which then include
    # the openai SDK and numpy) and each starting its own pools, which the suite's many servers would
    # pay again and again. test_http_processes and test_embedding_process run the defaults.
    env["MEMVM_WORKERS"] = "1"
    env["MEMVM_EMBEDDING_PROCESS"] = "false"
    env.update(memvm_settings)
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    def __init__(self, process: subprocess.Popen, log_path: Path, base_url: str) -> None:
        self.process = process
        self.log_path = log_path
        self.base_url = base_url

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def first_line(self) -> str:
        lines = self.log().splitlines()
        return lines[0] if lines else ""

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + HEALTH_TIMEOUT
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"memvm serve exited early with code {self.process.returncode}; log:\n{self.log()}")
            try:
                response = httpx.get(f"{self.base_url}/v1/health/", timeout=2.0)
                if response.status_code == 200:
                    assert response.json() == {"version": __version__, "status": "ok"}
                    return
                last_error = RuntimeError(f"health answered {response.status_code}: {response.text}")
            except httpx.TransportError as error:
                last_error = error
            time.sleep(0.1)
        pytest.fail(f"memvm serve not healthy after {HEALTH_TIMEOUT:.0f}s ({last_error!r}); log:\n{self.log()}")

    def interrupt(self, signum: signal.Signals = signal.SIGINT) -> int:
        """Send `signum` (SIGINT is Ctrl-C; SIGTERM is what docker and systemd send) and return
        the exit code; fails if it takes longer than STOP_TIMEOUT."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"memvm serve still running {STOP_TIMEOUT:.0f}s after {signum.name}; log:\n{self.log()}")


@contextlib.contextmanager
def serve(log_path: Path, env: dict[str, str], *args: str, port: int) -> Iterator[Served]:
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            memvm_command("serve", *args),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C on pytest must not also reach the server directly
        )
    served = Served(process, log_path, f"http://127.0.0.1:{port}")
    try:
        served.wait_healthy()
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT)


def postmaster_pid(pg_dir: Path) -> int:
    return int((pg_dir / "postmaster.pid").read_text().splitlines()[0])


def assert_postgres_stopped(pg_dir: Path, postmaster: psutil.Process, log: str) -> None:
    deadline = time.monotonic() + 5.0
    while (pg_dir / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (pg_dir / "postmaster.pid").exists(), f"embedded PostgreSQL left running; memvm log:\n{log}"
    with contextlib.suppress(psutil.TimeoutExpired):
        postmaster.wait(timeout=max(0.1, deadline - time.monotonic()))
    # is_running() also compares the creation time, so a reused pid does not count.
    assert not postmaster.is_running(), f"postmaster pid {postmaster.pid} still running; memvm log:\n{log}"
