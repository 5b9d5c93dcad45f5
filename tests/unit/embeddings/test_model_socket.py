"""The local model lent over a Unix socket (embeddings/model_socket.py): the same vectors as in
process, a query answered while a batch holds the queue's thread, the worker's errors raised, and
this process's own model while the socket does not answer."""

import asyncio
import hashlib
import logging
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from memvm.api.errors import status_of
from memvm.embeddings import model_socket
from memvm.embeddings.local import DIM, LocalMiniLM, shared_local_embedder
from memvm.embeddings.model_socket import FRAME_TEXTS, ModelServer, ModelSocketClient, new_socket_path
from memvm.embeddings.ports import EmbeddingFailed
from memvm.embeddings.registry import EmbedderRegistry


def fake_vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return (vector / np.linalg.norm(vector)).tolist()


class FakeModel:
    """What ModelServer and the client's fallback use of LocalMiniLM, without the model: records
    each call's texts, or fails with `error`."""

    model = "local/all-MiniLM-L6-v2"
    dim = DIM

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[list[str]] = []

    def on_another_thread(self) -> "FakeModel":
        return self

    async def embed_array_counting(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        if self.error is not None:
            raise self.error
        if texts:
            self.calls.append(list(texts))
        return np.array([fake_vector(text) for text in texts], dtype=np.float32).reshape(-1, DIM), len(texts) * 3

    async def embed_counting(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        vectors, tokens = await self.embed_array_counting(texts)
        return vectors.tolist(), tokens


@pytest.fixture
def socket_path() -> Iterator[Path]:
    path = new_socket_path()
    assert path is not None
    yield path
    path.unlink(missing_ok=True)
    path.parent.rmdir()


async def started(path: Path, model: object) -> ModelServer:
    server = ModelServer(path, model)  # type: ignore[arg-type]
    await server.start()
    return server


async def test_the_vectors_and_token_counts_are_the_models_in_this_process(socket_path: Path) -> None:
    model = LocalMiniLM()
    server = await started(socket_path, model)
    texts = ["Bob's daughter is learning to play the violin.", "word " * 400, "Where is the wifi password?"]
    try:
        lent = await ModelSocketClient(socket_path, fallback=FakeModel).embed_counting(texts)
    finally:
        await server.close()

    assert lent == await model.embed_counting(texts)  # bit for bit, tokens included (256 for the long one)


async def test_a_query_is_answered_while_a_batch_holds_the_queues_thread(socket_path: Path) -> None:
    model = LocalMiniLM()
    server = await started(socket_path, model)
    release = threading.Event()
    holding = asyncio.get_running_loop().run_in_executor(model._thread, release.wait)  # the queue's batch
    try:
        vectors = await asyncio.wait_for(ModelSocketClient(socket_path, fallback=FakeModel).embed(["a query"]), 10)
    finally:
        release.set()
        await holding
        await server.close()

    assert np.allclose(vectors, await model.embed(["a query"]), atol=1e-6)


async def test_a_big_call_goes_in_frames_of_at_most_64_texts(socket_path: Path) -> None:
    fake = FakeModel()
    server = await started(socket_path, fake)
    texts = [f"passage {n}" for n in range(2 * FRAME_TEXTS + 3)]
    try:
        vectors, tokens = await ModelSocketClient(socket_path, fallback=FakeModel).embed_counting(texts)
    finally:
        await server.close()

    assert [len(call) for call in fake.calls] == [FRAME_TEXTS, FRAME_TEXTS, 3]
    assert np.allclose(vectors, [fake_vector(text) for text in texts]) and tokens == 3 * len(texts)


async def test_the_workers_error_is_raised_as_a_502_not_embedded_here(socket_path: Path) -> None:
    server = await started(socket_path, FakeModel(error=RuntimeError("the model file is damaged")))
    fallback = FakeModel()
    try:
        with pytest.raises(EmbeddingFailed, match="the model file is damaged") as raised:
            await ModelSocketClient(socket_path, fallback=lambda: fallback).embed(["hello"])
    finally:
        await server.close()

    assert fallback.calls == [] and status_of(raised.value) == 502


async def test_without_a_server_it_embeds_here_and_tries_the_socket_again_later(
    socket_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_socket, "RETRY_AFTER_SECONDS", 0.3)
    fallback, lent = FakeModel(), FakeModel()
    client = ModelSocketClient(socket_path, fallback=lambda: fallback)

    with caplog.at_level(logging.WARNING, "memvm.embeddings"):
        first = await client.embed(["one"])
    server = await started(socket_path, lent)
    try:
        second = await client.embed(["two"])  # within the retry delay: still here
        await asyncio.sleep(0.35)
        third = await client.embed(["three"])
    finally:
        await server.close()

    assert [first, second, third] == [[fake_vector("one")], [fake_vector("two")], [fake_vector("three")]]
    assert fallback.calls == [["one"], ["two"]] and lent.calls == [["three"]]
    assert "does not answer" in caplog.text and str(socket_path) in caplog.text


async def test_a_connection_closed_by_a_restarted_worker_is_opened_again_once(
    socket_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before, after, fallback = FakeModel(), FakeModel(), FakeModel()
    client = ModelSocketClient(socket_path, fallback=lambda: fallback)
    server = await started(socket_path, before)
    await client.embed(["one"])  # keeps its connection
    await server.close()
    server = await started(socket_path, after)
    try:
        with caplog.at_level(logging.WARNING, "memvm.embeddings"):
            vectors = await client.embed(["two"])
    finally:
        await server.close()

    assert vectors == [fake_vector("two")] and after.calls == [["two"]] and fallback.calls == []
    assert "does not answer" not in caplog.text


async def test_a_new_server_replaces_the_socket_and_the_old_one_leaves_it_in_place(socket_path: Path) -> None:
    old, new = FakeModel(), FakeModel()
    first = await started(socket_path, old)
    second = await started(socket_path, new)
    await first.close()
    try:
        await ModelSocketClient(socket_path, fallback=FakeModel).embed(["hello"])
    finally:
        await second.close()

    assert new.calls == [["hello"]] and old.calls == []
    assert not socket_path.exists()  # the last one removes it


async def test_no_texts_need_no_socket_and_one_str_is_refused(socket_path: Path) -> None:
    client = ModelSocketClient(socket_path, fallback=FakeModel)

    assert await client.embed([]) == []
    with pytest.raises(TypeError):
        await client.embed("one text")  # type: ignore[arg-type]


def test_a_socket_path_too_long_for_an_address_is_none(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setattr(model_socket, "MAX_PATH_BYTES", 8)
    made = set(Path(tempfile.gettempdir()).glob("memvm-model-*"))

    with caplog.at_level(logging.INFO, "memvm.embeddings"):
        assert new_socket_path() is None

    assert "each HTTP process loads the embedding model" in caplog.text
    assert set(Path(tempfile.gettempdir()).glob("memvm-model-*")) == made  # nothing left behind


def test_the_registry_lends_the_local_handle_only_when_given_a_socket(socket_path: Path) -> None:
    lent = EmbedderRegistry(model_socket=socket_path)

    assert isinstance(lent.for_handle(None), ModelSocketClient)
    assert lent.for_handle("local/all-MiniLM-L6-v2") is lent.local_model()
    assert EmbedderRegistry().for_handle(None) is shared_local_embedder()
