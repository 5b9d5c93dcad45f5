"""The local model held by one process, `memvm serve`'s embedding worker, and lent to its HTTP
processes over a Unix socket: one `memvm serve` loads it once (about 130 MiB for each process that
holds it), with the same vectors.

Frames, both ways: a 4-byte big-endian length, then the body. A request is UTF-8 JSON
{"texts": [...]}; the answer is b"V", the number of tokens the model read (4 bytes, big-endian) and the
vectors as little-endian float32 rows, or b"E" and a UTF-8 message. One request at a time per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memvm.embeddings.local import BATCH_SIZE, DIM, MODEL_ID, LocalMiniLM, shared_local_embedder
from memvm.embeddings.ports import CountingEmbedder, EmbeddingFailed

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("memvm.embeddings")

_LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES = 16 * 1024 * 1024
# A big call (an agent file's passages) goes in frames of this many texts: the other processes'
# queries are answered between them.
FRAME_TEXTS = BATCH_SIZE
CONNECT_TIMEOUT_SECONDS = 0.5
REPLY_TIMEOUT_SECONDS = 30.0  # the first query after the worker's start waits for the model's load
RETRY_AFTER_SECONDS = 5.0  # of embedding in this process, once the socket did not answer
# sun_path holds 107 bytes and a NUL; the server binds `<path>.<pid>` first (up to 8 more).
MAX_PATH_BYTES = 96
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def new_socket_path() -> Path | None:
    """A socket path in a new private (0700) temporary directory; the caller removes the directory.
    Not in the data dir: several servers on external databases may share one, and it may be too deep
    for a socket's address. None (logged) when every temporary directory's path is too long: the
    HTTP processes then load the model themselves."""
    for parent in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        path = Path(tempfile.mkdtemp(prefix="memvm-model-", dir=parent)) / "model.sock"
        if len(os.fsencode(path)) <= MAX_PATH_BYTES:
            return path
        path.parent.rmdir()
    log.info("no temporary directory with a path short enough for a Unix socket: each HTTP process loads the embedding model")
    return None


def _frame(body: bytes) -> bytes:
    return _LENGTH.pack(len(body)) + body


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {length} bytes (at most {MAX_FRAME_BYTES})")
    return await reader.readexactly(length)


class ModelServer:
    """Serves `model`'s vectors on `path`, from a thread of its own on the same loaded model: on the
    thread of `model` (the worker's queue) a query would wait behind a batch, seconds at a time."""

    def __init__(self, path: Path, model: LocalMiniLM) -> None:
        self._path = path
        self._model = model.on_another_thread()
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None
        self._clients: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen; the model loads at the first request that needs it, as in any process (an idle
        server holds none). The socket replaces any file at `path` in one step: a restarted worker
        takes over without a moment in which clients find none."""
        bound = self._path.with_name(f"{self._path.name}.{os.getpid()}")
        bound.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._serve_connection, path=str(bound))
        os.chmod(bound, 0o600)
        os.replace(bound, self._path)
        self._inode = self._path.stat().st_ino

    async def close(self) -> None:
        """Stop listening, end the clients' connections (they connect again, to the next worker), and
        remove the socket file unless a newer worker's replaced it."""
        if self._server is not None:
            self._server.close()
            for client in list(self._clients):
                client.close()
            await self._server.wait_closed()
        with contextlib.suppress(OSError):
            if self._path.stat().st_ino == self._inode:
                self._path.unlink()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while True:
                request = await _read_frame(reader)
                writer.write(_frame(await self._answer(request)))
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass  # the client closed the connection
        except (ConnectionError, ValueError) as error:
            log.debug("an embedding client's connection ended: %s", error)
        finally:
            self._clients.discard(writer)
            writer.close()

    async def _answer(self, request: bytes) -> bytes:
        try:
            texts = json.loads(request)["texts"]
            if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
                raise ValueError("'texts' must be a list of strings")
            vectors, tokens = await self._model.embed_array_counting(texts)
        except Exception as error:  # the client raises it as EmbeddingFailed
            log.warning("embedding texts for another process failed: %s", error)
            return b"E" + str(error).encode()
        return b"V" + _LENGTH.pack(tokens) + vectors.astype("<f4", copy=False).tobytes()


class _Unreachable(Exception):
    """The socket did not answer: no server, a closed connection, or no reply in time."""

    def __init__(self, error: Exception) -> None:
        super().__init__(repr(error))
        self.retry = not isinstance(error, TimeoutError)  # a worker that took 30 s would take them again


class ModelSocketClient:
    """CountingEmbedder: the local model's vectors, computed by the process that serves `path`. While
    the socket does not answer (its worker restarting), this process embeds with `fallback` (its own
    model, loaded on first need) and tries the socket again RETRY_AFTER_SECONDS later."""

    model = MODEL_ID
    dim = DIM

    def __init__(self, path: Path, fallback: Callable[[], CountingEmbedder] = shared_local_embedder) -> None:
        self._path = path
        self._fallback = fallback
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()  # one request in flight on the connection
        self._connection: Connection | None = None
        self._retry_at = 0.0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors, _ = await self.embed_counting(texts)
        return vectors

    async def embed_counting(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        if isinstance(texts, str):  # a str is a Sequence[str]: one vector per character is never meant
            raise TypeError("embed() takes a sequence of texts, not one str")
        if not texts:
            return [], 0
        if time.monotonic() >= self._retry_at:
            try:
                return await self._remote(list(texts))
            except _Unreachable as error:
                log.warning(
                    "the embedding worker's socket %s does not answer (%s): embedding in this process for %.0f s",
                    self._path,
                    error,
                    RETRY_AFTER_SECONDS,
                )
                self._retry_at = time.monotonic() + RETRY_AFTER_SECONDS
        return await self._fallback().embed_counting(texts)

    async def _remote(self, texts: list[str]) -> tuple[list[list[float]], int]:
        vectors: list[list[float]] = []
        tokens = 0
        for start in range(0, len(texts), FRAME_TEXTS):
            frame_texts = texts[start : start + FRAME_TEXTS]
            reply = await self._exchange(_frame(json.dumps({"texts": frame_texts}).encode()))
            frame_vectors, frame_tokens = _decoded(reply, len(frame_texts))
            vectors += frame_vectors.tolist()
            tokens += frame_tokens
        return vectors, tokens

    async def _exchange(self, request: bytes) -> bytes:
        self._on_this_loop()
        async with self._lock:
            kept = self._connection is not None
            try:
                return await self._send(request)
            except _Unreachable as unreachable:
                if not (kept and unreachable.retry):
                    raise
            return await self._send(request)  # the worker closed a kept connection (it restarted): once more

    async def _send(self, request: bytes) -> bytes:
        try:
            if self._connection is None:
                connecting = asyncio.open_unix_connection(str(self._path))
                self._connection = await asyncio.wait_for(connecting, CONNECT_TIMEOUT_SECONDS)
            reader, writer = self._connection
            writer.write(request)
            await writer.drain()
            return await asyncio.wait_for(_read_frame(reader), REPLY_TIMEOUT_SECONDS)
        except (OSError, EOFError, ValueError) as error:  # TimeoutError and IncompleteReadError among them
            self._drop()
            raise _Unreachable(error) from error

    def _on_this_loop(self) -> None:
        """A connection and a lock belong to one event loop (tests run several in one process)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._lock, self._connection = loop, asyncio.Lock(), None

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection[1].close()
            self._connection = None


def _decoded(reply: bytes, count: int) -> tuple[np.ndarray, int]:
    """The vectors and token count of a b"V" reply for `count` texts; EmbeddingFailed for b"E"."""
    import numpy as np

    expected = 1 + _LENGTH.size + count * DIM * 4
    if reply[:1] == b"E":
        raise EmbeddingFailed(f"The embedding worker could not embed the texts: {reply[1:].decode(errors='replace')}")
    if reply[:1] != b"V" or len(reply) != expected:
        raise EmbeddingFailed(f"The embedding worker answered {len(reply)} bytes for {count} texts ({expected} expected)")
    (tokens,) = _LENGTH.unpack_from(reply, 1)
    return np.frombuffer(reply, dtype="<f4", offset=1 + _LENGTH.size).reshape(count, DIM), tokens
