"""The processes of bench/scale_sim.py: the fake LLM, `memvm serve` replicas on one embedded PostgreSQL,
and their CPU time read from /proc."""

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

TICKS = os.sysconf("SC_CLK_TCK")
RESERVED_PORTS = {8283, 8399, 9283, 9284}  # memvm's default and the other benches' ports


class Fail(Exception):
    """A missing piece or a process that would not start: printed as one line, exit status 2."""


# ---------------------------------------------------------------- processes
def free_ports(count: int) -> list[int]:

    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in RESERVED_PORTS and port not in ports:
            ports.append(port)
    return ports


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, seconds: float, name: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(empty log)"]
            raise Fail(f"{name} exited with status {proc.returncode}: {tail[0]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise Fail(f"{name} did not answer {url} within {seconds:.0f} s (log: {log})")


@dataclass
class Cluster:
    """The fake LLM, the replicas and the one database they share; stop() ends what start*() began."""

    work: Path
    memvm_bin: str
    fake_llm: Path
    memvm_src: Path  # the tree measured, whatever the editable install points at
    pool_env: dict[str, str]  # MEMVM_DB_POOL_SIZE / _MAX_OVERFLOW / _TURN_LOCK_POOL_SIZE when asked for
    admin_key: str = field(default_factory=lambda: "scale-admin-" + secrets.token_urlsafe(24))
    replicas: list[tuple[int, subprocess.Popen[bytes]]] = field(default_factory=list)
    llm: subprocess.Popen[bytes] | None = None
    llm_url: str = ""

    @property
    def socket_dir(self) -> Path:
        return self.work / "data" / "pg"

    @property
    def database_url(self) -> str:
        return f"postgresql+asyncpg://postgres@/postgres?host={self.socket_dir}"

    def start_llm(self, port: int) -> None:
        log = self.work / "fake_llm.log"
        cmd = [sys.executable, str(self.fake_llm), "--host", "127.0.0.1", "--port", str(port), "--dim", "1536"]
        self.llm = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        self.llm_url = f"http://127.0.0.1:{port}/v1"
        wait_healthy(f"http://127.0.0.1:{port}/health", self.llm, log, 30, "fake LLM")

    def start_replica(self, port: int) -> str:
        first = not self.replicas
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMVM_", "OPENAI_"))}
        env |= {
            "MEMVM_DATA_DIR": str(self.work / ("data" if first else f"replica-{len(self.replicas) + 1}")),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(self.memvm_src), os.environ.get("PYTHONPATH")])),
            "MEMVM_WORKERS": "1",
            "MEMVM_ADMIN_API_KEY": self.admin_key,
            "MEMVM_OPENAI_BASE_URL": self.llm_url,
            "OPENAI_BASE_URL": self.llm_url,
            "MEMVM_OPENAI_API_KEY": "x",
            "OPENAI_API_KEY": "x",
        }
        env |= self.pool_env
        if not first:  # the others share the first one's database and leave the queue to its worker
            env |= {"MEMVM_DATABASE_URL": self.database_url, "MEMVM_EMBEDDING_WORKER": "false"}
        log = self.work / f"memvm-{port}.log"
        cmd = [self.memvm_bin, "serve", "--host", "127.0.0.1", "--port", str(port)]
        proc = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        self.replicas.append((port, proc))
        wait_healthy(f"http://127.0.0.1:{port}/v1/health/", proc, log, 240, f"memvm serve on port {port}")
        return f"http://127.0.0.1:{port}"

    def postmaster_pid(self) -> int:
        pid_file = self.socket_dir / "postmaster.pid"
        if not pid_file.exists():
            raise Fail(f"no {pid_file}: the first memvm serve started no embedded PostgreSQL")
        return int(pid_file.read_text().split()[0])

    def stop(self) -> None:
        postmaster = self.postmaster_pid() if (self.socket_dir / "postmaster.pid").exists() else None
        # the first replica last: stopping it stops the embedded PostgreSQL the others use
        for _, proc in reversed(self.replicas):
            stop_process(proc.pid, signal.SIGTERM, 40)
        if postmaster:
            stop_process(postmaster, signal.SIGINT, 30)
        if self.llm:
            stop_process(self.llm.pid, signal.SIGTERM, 10)


def stop_process(pid: int, sig: signal.Signals, seconds: float) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not our child (the postmaster): poll for it
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- CPU from /proc
def process_table() -> dict[int, tuple[int, float]]:
    """pid → (ppid, CPU seconds of the process and of its children it has reaped)."""
    table: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        rest = raw.rsplit(")", 1)[1].split()  # the name may hold spaces and parentheses
        ticks = sum(int(x) for x in rest[11:15])  # utime, stime, cutime, cstime
        table[int(entry)] = (int(rest[1]), ticks / TICKS)
    return table


def tree_cpu(table: dict[int, tuple[int, float]], roots: list[int], exclude: set[int]) -> float:
    """CPU seconds of the roots and all their descendants, minus the subtrees rooted at `exclude`."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [r for r in roots if r in table and r not in exclude]
    while todo:
        pid = todo.pop()
        total += table[pid][1]
        todo.extend(c for c in children.get(pid, []) if c not in exclude)
    return total


def machine_busy_seconds() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS  # all but idle and iowait
