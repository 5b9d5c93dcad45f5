"""OpenAIEmbedder and EmbedderRegistry against a fake /v1/embeddings endpoint (httpx.MockTransport
under the real openai SDK)."""

import base64
import json
import random
from collections.abc import AsyncIterator

import httpx
import numpy as np
import openai
import pytest

from memvm.embeddings.local import LocalMiniLM
from memvm.embeddings.openai_embedder import OpenAIEmbedder
from memvm.embeddings.ports import EmbeddingDimensionMismatch
from memvm.embeddings.registry import DEFAULT_EMBEDDING_HANDLE, EmbedderRegistry
from memvm.errors import InvalidInput, LLMRejected, LLMUnavailable
from memvm.llm.openai_chat import RetryPolicy

DIM = 8


def vector_for(text: str, dim: int) -> list[float]:
    """Deterministic, deliberately not unit length: the embedder must normalise."""
    rng = random.Random(text)
    return [rng.uniform(-3, 3) for _ in range(dim)]


class FakeEmbeddings:
    """Answers POST /v1/embeddings; `failures` are (status, message) sent before real answers."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.requests: list[dict] = []
        self.failures: list[tuple[int, str]] = []
        self.reverse = False  # answer in reverse order (with correct indices), as some servers may
        self.bodies: list[bytes] = []  # 200 answers with these bodies first, whatever they hold
        self.floats_only = False  # answer floats even when asked for base64, as some servers do
        self.refuse_base64 = False  # answer 400 to encoding_format=base64, as some proxies do

    def handler(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/embeddings", request.url.path
        body = json.loads(request.content)
        self.requests.append(body)
        if self.bodies:
            return httpx.Response(200, content=self.bodies.pop(0), headers={"content-type": "application/json"})
        if self.refuse_base64 and body.get("encoding_format") == "base64":
            return httpx.Response(400, json={"error": {"message": "encoding_format: 'base64' is not supported", "code": None}})
        if self.failures:
            status, message = self.failures.pop(0)
            return httpx.Response(status, json={"error": {"message": message, "type": "server_error", "code": None}})
        encode = base64_of if body.get("encoding_format") == "base64" and not self.floats_only else list
        data = [
            {"object": "embedding", "index": i, "embedding": encode(vector_for(text, self.dim))}
            for i, text in enumerate(body["input"])
        ]
        if self.reverse:
            data.reverse()
        usage = {"prompt_tokens": len(data), "total_tokens": len(data)}
        return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"], "usage": usage})


def base64_of(vector: list[float]) -> str:
    """As OpenAI encodes a vector: its float32s, little-endian, in base64."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


@pytest.fixture
def fake() -> FakeEmbeddings:
    return FakeEmbeddings()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def retry() -> RetryPolicy:
    return RetryPolicy(attempts=3, base_delay=0.01)


def recording_sleep(sleeps: list[float]):
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return sleep


@pytest.fixture
async def client(fake: FakeEmbeddings) -> AsyncIterator[openai.AsyncOpenAI]:
    http = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    async with openai.AsyncOpenAI(api_key="test-key", base_url="http://fake.test/v1", max_retries=0, http_client=http) as sdk:
        yield sdk


def embedder(client, sleeps, retry, *, dim=DIM, batch_size=64, **options) -> OpenAIEmbedder:
    return OpenAIEmbedder(client, "fake-embed", dim, batch_size, retry=retry, sleep=recording_sleep(sleeps), **options)


def unit(vector: list[float]) -> np.ndarray:
    v = np.asarray(vector)
    return v / np.linalg.norm(v)


async def test_batches_130_inputs_into_three_requests_in_order(client, fake, sleeps, retry):
    texts = [f"text {i}" for i in range(130)]
    fake.reverse = True
    vectors = await embedder(client, sleeps, retry).embed(texts)
    assert [len(r["input"]) for r in fake.requests] == [64, 64, 2]
    assert [t for r in fake.requests for t in r["input"]] == texts
    assert len(vectors) == 130
    for text, vector in zip(texts, vectors, strict=True):
        assert np.allclose(vector, unit(vector_for(text, DIM)))
        assert np.linalg.norm(vector) == pytest.approx(1.0)


async def test_request_shape(client, fake, sleeps, retry):
    await embedder(client, sleeps, retry).embed(["a"])
    await embedder(client, sleeps, retry, send_dimensions=True).embed(["b"])
    plain, sized = fake.requests
    assert plain == {"model": "fake-embed", "input": ["a"], "encoding_format": "base64"}
    assert sized["dimensions"] == DIM


@pytest.mark.parametrize("floats_only", [False, True], ids=["base64", "a server that answers floats"])
async def test_vectors_read_back_from_base64_and_from_floats(client, fake, sleeps, retry, floats_only):
    fake.floats_only = floats_only
    vectors = await embedder(client, sleeps, retry).embed(["a", "b"])
    for text, vector in zip(["a", "b"], vectors, strict=True):
        assert np.allclose(vector, unit(vector_for(text, DIM)), atol=1e-6)  # float32 on the wire
        assert isinstance(vector, list) and all(isinstance(x, float) for x in vector)


async def test_a_server_that_refuses_base64_is_asked_for_floats_from_then_on(client, fake, sleeps, retry):
    fake.refuse_base64 = True
    model = embedder(client, sleeps, retry)
    first = await model.embed(["a"])
    second = await model.embed(["b"])
    assert [r["encoding_format"] for r in fake.requests] == ["base64", "float", "float"]
    assert np.allclose(first[0], unit(vector_for("a", DIM))) and np.allclose(second[0], unit(vector_for("b", DIM)))
    assert sleeps == []  # a refusal is not retried as an outage


async def test_a_request_refused_whatever_the_encoding_keeps_base64_for_the_next(client, fake, sleeps, retry):
    fake.failures = [(400, "input is too long"), (400, "input is too long")]
    model = embedder(client, sleeps, retry)
    with pytest.raises(LLMRejected, match="input is too long"):
        await model.embed(["a" * 100])
    await model.embed(["b"])
    assert [r["encoding_format"] for r in fake.requests] == ["base64", "float", "base64"]


async def test_a_vector_with_nan_is_a_clear_error(client, fake, sleeps, retry):
    nan = base64.b64encode(np.asarray([float("nan")] * DIM, dtype="<f4").tobytes()).decode()
    fake.bodies = [json.dumps({"data": [{"index": 0, "embedding": nan}]}).encode()]
    with pytest.raises(LLMRejected, match="NaN or infinite"):
        await embedder(client, sleeps, retry).embed(["a"])


@pytest.mark.parametrize("embedding", ["AAAA=", "AAAAAAA=", "not base64!"], ids=["bad padding", "5 bytes", "not base64"])
async def test_base64_that_is_no_float32_vector_is_a_clear_error(client, fake, sleeps, retry, embedding):
    fake.bodies = [json.dumps({"data": [{"index": 0, "embedding": embedding}]}).encode()]
    with pytest.raises(LLMRejected, match="not an embedding list"):
        await embedder(client, sleeps, retry).embed(["a"])


async def test_no_texts_no_request(client, fake, sleeps, retry):
    assert await embedder(client, sleeps, retry).embed([]) == []
    assert fake.requests == []


async def test_wrong_dimension_is_a_clear_error(client, fake, sleeps, retry):
    with pytest.raises(EmbeddingDimensionMismatch, match="returned 8-dimensional vectors but 16 are configured"):
        await embedder(client, sleeps, retry, dim=16).embed(["a"])


async def test_a_body_that_is_not_json_is_retried_like_a_server_error(client, fake, sleeps, retry):
    fake.bodies = [b"<html>proxy error</html>"]
    vectors = await embedder(client, sleeps, retry).embed(["a"])
    assert np.allclose(vectors[0], unit(vector_for("a", DIM))) and len(fake.requests) == 2 and len(sleeps) == 1


@pytest.mark.parametrize(
    "body", [b'{"data": [{"index": 0}]}', b'{"error": "none"}', b"[1, 2]", b'{"data": [{"index": 0, "embedding": "x"}]}']
)
async def test_json_that_is_no_embedding_list_is_a_clear_error(client, fake, sleeps, retry, body):
    fake.bodies = [body]
    with pytest.raises((LLMRejected, EmbeddingDimensionMismatch), match="embedding list|dimensional"):
        await embedder(client, sleeps, retry).embed(["a"])
    assert len(fake.requests) == 1


async def test_server_error_then_success_is_retried(client, fake, sleeps, retry):
    fake.failures = [(500, "overloaded")]
    vectors = await embedder(client, sleeps, retry).embed(["a", "b"])
    assert len(vectors) == 2 and len(fake.requests) == 2 and len(sleeps) == 1


async def test_persistent_server_error_gives_up_after_the_policy(client, fake, sleeps, retry):
    fake.failures = [(503, "down")] * 5
    with pytest.raises(LLMUnavailable, match="Embedding request failed.*503.*after 3 attempts"):
        await embedder(client, sleeps, retry).embed(["a"])
    assert len(fake.requests) == 3


async def test_client_error_is_not_retried(client, fake, sleeps, retry):
    """Only asked once more, in floats, in case it was base64 that was refused."""
    fake.failures = [(400, "model 'fake-embed' not found")] * 2
    with pytest.raises(LLMRejected, match="not found"):
        await embedder(client, sleeps, retry).embed(["a"])
    assert len(fake.requests) == 2 and sleeps == []


# ---------------------------------------------------------------- registry


@pytest.fixture
async def registry(fake: FakeEmbeddings, sleeps, retry) -> AsyncIterator[EmbedderRegistry]:
    http = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    built = EmbedderRegistry(
        base_url="http://fake.test/v1", api_key="k", retry=retry, sleep=recording_sleep(sleeps), http_client=http
    )
    yield built
    await built.aclose()


@pytest.mark.parametrize("handle", [None, DEFAULT_EMBEDDING_HANDLE, "local/all-minilm-l6-v2", "LOCAL/ALL-MINILM-L6-V2"])
def test_default_and_local_handles_give_the_shared_local_model(registry, handle):
    local = registry.for_handle(handle)
    assert isinstance(local, LocalMiniLM) and local.model == DEFAULT_EMBEDDING_HANDLE and local.dim == 384
    assert registry.for_handle(None) is local
    assert EmbedderRegistry().for_handle(handle) is local  # shared across registries too


@pytest.mark.parametrize(
    ("model", "dim"),
    [("text-embedding-3-small", 1536), ("text-embedding-ada-002", 1536), ("text-embedding-3-large", 3072)],
)
def test_known_openai_models_need_no_dimension(registry, model, dim):
    remote = registry.for_handle(f"openai/{model}")
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.model, remote.dim) == (f"openai/{model}", dim)
    assert registry.for_handle(f"openai/{model}") is remote


def test_unknown_model_without_a_dimension_is_refused(registry):
    with pytest.raises(InvalidInput, match="MEMVM_EMBEDDING_DIM"):
        registry.for_handle("ollama/nomic-embed-text")


@pytest.mark.parametrize("handle", ["nomic-embed-text", "/x", "ollama/", "local/bge-small"])
def test_malformed_or_unknown_local_handles_are_refused(registry, handle):
    with pytest.raises(InvalidInput, match="embedding"):
        registry.for_handle(handle)


async def test_configured_dimension_is_used_and_sent(fake, sleeps, retry):
    http = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    registry = EmbedderRegistry(base_url="http://fake.test/v1", dim=DIM, batch_size=2, retry=retry, http_client=http)
    remote = registry.for_handle("ollama/nomic-embed-text")
    vectors = await remote.embed(["a", "b", "c"])
    assert remote.model == "ollama/nomic-embed-text" and len(vectors) == 3
    assert [r["model"] for r in fake.requests] == ["nomic-embed-text"] * 2
    assert all(r["dimensions"] == DIM for r in fake.requests)
    await registry.aclose()
    assert http.is_closed


async def test_from_settings_falls_back_to_the_chat_endpoint():
    from memvm.config import Settings

    settings = Settings(openai_base_url="http://chat.test/v1", openai_api_key="sk-chat", llm_attempts=2)
    registry = EmbedderRegistry.from_settings(settings)
    remote = registry.for_handle("openai/text-embedding-3-small")
    assert remote.endpoint == "http://chat.test/v1"
    assert registry._client.api_key == "sk-chat"
    await registry.aclose()
