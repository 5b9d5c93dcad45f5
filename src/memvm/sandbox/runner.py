"""Run one custom tool call in its own process and collect what it did, within the limits.

The process is killed (its whole tree: bubblewrap's PID namespace dies with it) when the wall-clock
timeout passes or when it writes more than the output budget. Every way a call can end becomes a
`ToolRunResult`: the agent sees an error and stays usable."""

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any, Literal

from memvm.config import Settings
from memvm.sandbox import command, launchers
from memvm.sandbox.calls import ToolRun, ToolRunResult
from memvm.sandbox.identities import Identities
from memvm.sandbox.venvs import RequirementsError, Venvs

log = logging.getLogger(__name__)
_CHUNK = 64 * 1024
# (the launchers found, the interpreter) → why they cannot run tools (None: they can).
_PROBED: dict[tuple[launchers.Launchers, str], str | None] = {}
PROBE = ToolRun(source="def ping() -> str:\n    return 'pong'\n", function="ping", arguments={})


@dataclass
class _Capture:
    """stdout, stderr and the result channel share one byte budget. Each pipe is read to its end
    even past the budget (and the process killed): an unread pipe would block its writer."""

    budget: int
    process: subprocess.Popen[bytes]
    used: int = 0
    overflowed: bool = False
    parts: dict[str, bytearray] = field(default_factory=lambda: {name: bytearray() for name in ("stdout", "stderr", "result")})

    async def drain(self, name: str, reader: asyncio.StreamReader) -> None:
        while chunk := await reader.read(_CHUNK):
            self.used += len(chunk)
            if self.used <= self.budget:
                self.parts[name] += chunk
            elif not self.overflowed:
                self.overflowed = True
                _kill(self.process)

    def text(self, name: str) -> str:
        return self.parts[name].decode("utf-8", errors="replace")


class Sandbox:
    """One per process. `mode` is what runs custom tools; `unavailable` says why none can."""

    def __init__(self, settings: Settings) -> None:
        self.mode: Literal["bubblewrap", "process"] = settings.tool_sandbox
        self.unavailable: str | None = None
        self._launchers: launchers.Launchers | None = None  # found by `probe`
        self._timeout = settings.tool_timeout_seconds
        self._limits = command.Limits.of(settings)
        self._output_budget = settings.tool_max_output_bytes
        self._venvs = Venvs(settings.data_dir / "tool-venvs")
        self._preparing: set[asyncio.Task[None]] = set()  # venv builds under way (a reference keeps them alive)
        self._identities = Identities(settings.tool_sandbox_first_uid, settings.tool_concurrency, settings.tool_max_processes)

    async def probe(self) -> None:
        """Run a trivial tool once: what cannot run it now will not run a real one later. The host
        does not change while the process runs, so each set of launchers is probed once per process."""
        try:
            found = launchers.find(jail=self.mode == "bubblewrap", switch_uid=os.geteuid() == 0)
        except launchers.LaunchersMissing as missing:
            self.unavailable = str(missing)
            return
        self._launchers = found
        key = (found, command.base_interpreter())
        if key not in _PROBED:
            _PROBED[key] = await self._probe()
        self.unavailable = _PROBED[key]

    async def _probe(self) -> str | None:
        result = await self.run(PROBE)
        if result.status != "success" or result.value != "pong":
            return f"a test call failed: {(result.stderr.strip() or result.value)[:500]}"
        return None

    def ready_launchers(self) -> launchers.Launchers | None:
        """What `probe` found, for the long-lived MCP servers that run in the same jail
        (servers.py); None before `probe` or where the sandbox is unavailable (`unavailable` says why)."""
        return self._launchers if self.unavailable is None else None

    def describe(self) -> tuple[int, str]:
        """The start-up log line: which sandbox runs custom tools, if any, and which bwrap."""
        bwrap = f"; bwrap: {self._launchers.bwrap}" if self._launchers and self._launchers.bwrap else ""
        if self.unavailable is not None:
            return logging.ERROR, (
                f"custom tools cannot run: the {self.mode} sandbox is unavailable ({self.unavailable}{bwrap}); "
                "install bubblewrap and allow user namespaces, or set MEMVM_TOOL_SANDBOX=process to accept "
                "plain subprocesses with resource limits"
            )
        if self.mode == "process":
            return logging.WARNING, (
                "custom tools run as plain subprocesses with resource limits (MEMVM_TOOL_SANDBOX=process): "
                "they can read what the server's files allow and use the network"
            )
        return logging.INFO, f"custom tools run in a bubblewrap sandbox (no network, no view of the server's files{bwrap})"

    def prepare(self, requirements: tuple[str, ...]) -> None:
        """Build a tool's requirements venv now, in the background, so that its first call does not
        wait for pip; a failure is logged here and reported again by the call."""
        task = asyncio.create_task(self._prepare(requirements))
        self._preparing.add(task)
        task.add_done_callback(self._preparing.discard)

    async def close(self) -> None:
        """Stop venv builds still under way (the next call builds again)."""
        for task in list(self._preparing):
            task.cancel()
        await asyncio.gather(*self._preparing, return_exceptions=True)

    async def _prepare(self, requirements: tuple[str, ...]) -> None:
        try:
            await self._venvs.interpreter(requirements)
        except RequirementsError as error:
            log.warning("could not prepare the venv for %s: %s", " ".join(requirements), error)

    async def run(self, call: ToolRun) -> ToolRunResult:
        if self._launchers is None:
            return ToolRunResult("error", f"Custom tools cannot run on this server: {self.unavailable or 'not probed'}.")
        try:
            python = await self._venvs.interpreter(call.requirements) if call.requirements else command.base_interpreter()
        except RequirementsError as error:
            return ToolRunResult("error", f"The tool's pip_requirements could not be installed: {error}")
        if unreachable := self._unreachable(python):
            return ToolRunResult("error", unreachable)
        async with self._identities.lease() as identity:
            with tempfile.TemporaryDirectory(prefix="memvm-tool-") as workdir:
                if identity.uid is not None:
                    os.chown(workdir, identity.uid, identity.uid)
                switch = identity.switch(self._launchers.setpriv)
                launch = command.launch(
                    self._launchers, self._limits, python, switch=switch, processes=identity.processes(), network=call.network
                )
                return await self._run(call, [*launch, *command.interpreter(python)], workdir)

    def _unreachable(self, python: str) -> str | None:
        """Without a jail nothing is bound: a call that runs as its own uid must reach the interpreter
        where it is, and is refused, saying why, rather than run with more rights."""
        if self.mode != "process" or self._launchers is None or self._launchers.setpriv is None:
            return None
        if closed := command.closed_directory(python):
            return (
                f"The interpreter {python} cannot be started as the call's own uid: {closed} lets no other user in "
                "and MEMVM_TOOL_SANDBOX=process binds nothing; use the bubblewrap sandbox, or a Python (and a data "
                "dir) that every user can read."
            )
        return None

    async def _run(self, call: ToolRun, argv: list[str], workdir: str) -> ToolRunResult:
        """The request goes in through an unnamed temporary file (no size limit, no path on disk);
        stdout, stderr and the result come back through pipes of our own, so waiting for the
        process never depends on them being read. subprocess.Popen starts it with vfork: an event
        loop's own spawn (uvloop's) forks the whole server, which costs tens of ms at its size."""
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "result")}
        with tempfile.TemporaryFile() as request:
            request.write(json.dumps({**_request(call), "result_fd": pipes["result"][1]}).encode())
            request.seek(0)
            try:
                process = subprocess.Popen(
                    argv,
                    stdin=request,
                    stdout=pipes["stdout"][1],
                    stderr=pipes["stderr"][1],
                    pass_fds=(pipes["result"][1],),
                    env=command.BASE_ENV,
                    cwd=workdir,
                    start_new_session=True,
                )
            finally:
                for _, write_end in pipes.values():
                    os.close(write_end)
        return await self._collect(process, {name: read_end for name, (read_end, _) in pipes.items()})

    async def _collect(self, process: subprocess.Popen[bytes], pipes: dict[str, int]) -> ToolRunResult:
        loop = asyncio.get_running_loop()
        capture = _Capture(self._output_budget, process)
        transports: list[asyncio.BaseTransport] = []
        drains = []
        for name, fd in pipes.items():
            reader = asyncio.StreamReader()
            protocol = functools.partial(asyncio.StreamReaderProtocol, reader)
            transports.append((await loop.connect_read_pipe(protocol, os.fdopen(fd, "rb", 0)))[0])
            drains.append(capture.drain(name, reader))
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.gather(*drains, _exit_of(process)), self._timeout)
        except TimeoutError:
            timed_out = True
        finally:
            _kill(process)
            await _exit_of(process)
            for pipe in transports:
                pipe.close()
        return self._outcome(capture, process.returncode, timed_out=timed_out)

    def _outcome(self, capture: _Capture, returncode: int | None, *, timed_out: bool) -> ToolRunResult:
        stdout, stderr = capture.text("stdout"), capture.text("stderr")
        if timed_out:
            return ToolRunResult("error", f"The tool did not finish within {self._timeout:g} s and was stopped.", stdout, stderr)
        if capture.overflowed:
            return ToolRunResult(
                "error", f"The tool wrote more than {self._output_budget} bytes of output and was stopped.", stdout, stderr
            )
        try:
            result = json.loads(capture.text("result"))
            return ToolRunResult("success" if result["status"] == "success" else "error", str(result["value"]), stdout, stderr)
        except (ValueError, KeyError, TypeError):
            return ToolRunResult("error", _ended_without_result(returncode), stdout, stderr)


def _request(call: ToolRun) -> dict[str, Any]:
    return {
        "source": call.source,
        "function": call.function,
        "arguments": dict(call.arguments),
        "env": {**command.BASE_ENV, **call.env},
        "agent_state": dict(call.agent_state) if call.agent_state is not None else None,
    }


async def _exit_of(process: subprocess.Popen[bytes]) -> None:
    """Wait for the process without a thread: its pidfd becomes readable when it exits."""
    if process.poll() is not None:
        return
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def on_exit() -> None:
        if not exited.done():
            exited.set_result(None)

    pidfd = os.pidfd_open(process.pid)
    loop.add_reader(pidfd, on_exit)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    process.wait()


def _kill(process: subprocess.Popen[bytes]) -> None:
    """The process group: bubblewrap, and in process mode the tool's own children."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _ended_without_result(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name
        why = " (the CPU-time limit)" if name in ("SIGXCPU", "SIGKILL") else ""
        return f"The tool process was killed by {name}{why} before it returned."
    return (
        f"The tool process exited with code {returncode} before it returned "
        "(it may have called exit, or run out of memory or processes)."
    )
