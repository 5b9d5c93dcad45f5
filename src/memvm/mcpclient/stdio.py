"""The stdio transport: memvm starts the server itself, in the sandbox's jail, and frames its
stdout. The SDK's stdio client reads a line without bound; here a line over the message cap kills
the server, a line that is not JSON-RPC is skipped (and counted), and stderr keeps only its last
4 KiB, for the reason given when the server dies. The SDK's ClientSession reads and writes the
same memory streams as with the SDK's own transports."""

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

from memvm.sandbox.servers import ServerLaunch

log = logging.getLogger(__name__)
_CHUNK = 64 * 1024
_STDERR_KEPT = 4096
_EXIT_WAIT_SECONDS = 2.0  # for the exit status after stdout ends, and for the kill to land

Fail = Callable[[str], None]  # records why the session ends, and ends it
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@dataclass
class ServerOutput:
    """What a server wrote besides its messages: bounded, whatever it writes."""

    skipped_lines: int = 0
    stderr: bytearray = field(default_factory=bytearray)

    def keep_stderr(self, chunk: bytes) -> None:
        self.stderr += chunk
        del self.stderr[:-_STDERR_KEPT]

    def last_stderr_line(self) -> str:
        lines = self.stderr.decode("utf-8", errors="replace").strip().splitlines()
        return lines[-1][:300] if lines else ""

    def detail(self) -> str:
        """What to add to a timeout's reason: the noise it made instead of answering."""
        notes = [f"skipped {self.skipped_lines} lines that are not JSON-RPC"] if self.skipped_lines else []
        notes += [f"last stderr line: {line}"] if (line := self.last_stderr_line()) else []
        return f" ({'; '.join(notes)})" if notes else ""


@asynccontextmanager
async def stdio_transport(launch: ServerLaunch, max_bytes: int, output: ServerOutput, fail: Fail) -> AsyncIterator[Streams]:
    """Start the server; on exit kill its process group (bubblewrap's PID namespace goes with it)."""
    workdir = tempfile.mkdtemp(prefix="memvm-mcp-")
    try:
        if launch.uid is not None:
            os.chown(workdir, launch.uid, launch.uid)
        process = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=launch.env,
            cwd=workdir,
            start_new_session=True,
        )
        try:
            async with _pipes(process, max_bytes, output, fail) as streams:
                yield streams
        finally:
            _kill(process)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), _EXIT_WAIT_SECONDS)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@asynccontextmanager
async def _pipes(process: asyncio.subprocess.Process, max_bytes: int, output: ServerOutput, fail: Fail) -> AsyncIterator[Streams]:
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)
    async with incoming_writer, incoming, outgoing, outgoing_reader, anyio.create_task_group() as tasks:
        stderr_done = anyio.Event()
        tasks.start_soon(_keep_stderr, process, output, stderr_done)
        tasks.start_soon(_read_messages, process, incoming_writer, max_bytes, output, fail, stderr_done)
        tasks.start_soon(_write_messages, process, outgoing_reader)
        try:
            yield incoming, outgoing
        finally:
            tasks.cancel_scope.cancel()


class _Oversized(Exception):
    pass


@dataclass
class _Lines:
    """Newline framing that never holds more than `max_bytes` of one line."""

    max_bytes: int
    partial: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> list[bytes]:
        *complete, rest = chunk.split(b"\n")
        lines = []
        for piece in complete:
            self._add(piece)
            lines.append(bytes(self.partial))
            self.partial.clear()
        self._add(rest)
        return lines

    def _add(self, piece: bytes) -> None:
        if len(self.partial) + len(piece) > self.max_bytes:
            raise _Oversized
        self.partial += piece


async def _read_messages(
    process: asyncio.subprocess.Process,
    deliver: MemoryObjectSendStream[SessionMessage | Exception],
    max_bytes: int,
    output: ServerOutput,
    fail: Fail,
    stderr_done: anyio.Event,
) -> None:
    """Messages until stdout ends, then why it ended: the exit status and the last stderr line."""
    assert process.stdout is not None
    lines = _Lines(max_bytes)
    async with deliver:
        while chunk := await process.stdout.read(_CHUNK):
            try:
                complete = lines.feed(chunk)
            except _Oversized:
                _kill(process)
                fail(f"sent a message over {max_bytes} bytes")
                return
            for line in complete:
                if not await _deliver(line, deliver, output):
                    return
        with anyio.move_on_after(_EXIT_WAIT_SECONDS):
            await stderr_done.wait()
            await process.wait()
        fail(_exit_reason(process.returncode, output))


async def _deliver(line: bytes, deliver: MemoryObjectSendStream[SessionMessage | Exception], output: ServerOutput) -> bool:
    """Hand one line to the session; False once the session is gone."""
    if not line.strip():
        return True
    try:
        if not line.lstrip().startswith(b"{"):  # not even JSON: skipped without parsing (a babbler costs little)
            raise ValueError
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:  # pydantic's ValidationError is one
        output.skipped_lines += 1
        return True
    try:
        await deliver.send(SessionMessage(message))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return False
    return True


async def _write_messages(process: asyncio.subprocess.Process, messages: MemoryObjectReceiveStream[SessionMessage]) -> None:
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        async for session_message in messages:
            data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
            process.stdin.write(data.encode() + b"\n")
            await process.stdin.drain()


async def _keep_stderr(process: asyncio.subprocess.Process, output: ServerOutput, done: anyio.Event) -> None:
    assert process.stderr is not None
    try:
        while chunk := await process.stderr.read(_CHUNK):
            output.keep_stderr(chunk)
    finally:
        done.set()


def _exit_reason(returncode: int | None, output: ServerOutput) -> str:
    if returncode is None:
        why = "closed its stdout"
    elif returncode < 0:
        why = f"was killed by {signal.Signals(-returncode).name}"
    else:
        why = f"exited with status {returncode}"
    line = output.last_stderr_line()
    return f"{why}: {line}" if line else why


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
