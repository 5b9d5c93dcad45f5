"""The built-in tools' shipped vectors (tools/builtin_vectors.json) are the local model's vectors of
every built-in's current search text: a built-in whose description changed without the file being
written again fails here. MEMVM_WRITE_BUILTIN_VECTORS=1 writes the file from the model first."""

import json
import os

import numpy as np

from memvm.embeddings.local import DIM, MODEL_ID, shared_local_embedder
from memvm.tools import builtin_vectors
from memvm.tools.service import _builtin_rows


def model_vectors(texts: list[str]) -> np.ndarray:
    return shared_local_embedder().embed_sync(texts)


def write_vectors_file(texts: list[str]) -> None:
    vectors = {
        builtin_vectors.text_key(text): builtin_vectors.encode_vector(list(map(float, vector)))
        for text, vector in zip(texts, model_vectors(texts), strict=True)
    }
    document = {"model": MODEL_ID, "dim": DIM, "vectors": dict(sorted(vectors.items()))}
    builtin_vectors.VECTORS_FILE.write_text(json.dumps(document, indent=1) + "\n")
    builtin_vectors._shipped.cache_clear()


def test_every_built_in_ships_the_local_models_vector_of_its_text() -> None:
    texts = [row["search_text"] for row in _builtin_rows()]
    if os.environ.get("MEMVM_WRITE_BUILTIN_VECTORS") == "1":
        write_vectors_file(texts)

    shipped = [builtin_vectors.stored_vector_columns(text) for text in texts]

    missing = [text.splitlines()[0] for text, columns in zip(texts, shipped, strict=True) if columns["embedding"] is None]
    assert not missing, f"no shipped vector for {missing}: run this test with MEMVM_WRITE_BUILTIN_VECTORS=1"
    assert all(columns["embedding_model"] == MODEL_ID and columns["embedding_dim"] == DIM for columns in shipped)
    # The same vectors up to the int8 kernels of this CPU (another host's may round differently):
    # each shipped vector points where the model's points, a changed text's would not.
    shipped_vectors = np.array([columns["embedding"] for columns in shipped])
    assert (shipped_vectors * model_vectors(texts)).sum(axis=1).min() > 0.999


def test_a_text_without_a_shipped_vector_is_left_to_the_queue() -> None:
    assert builtin_vectors.stored_vector_columns("a description nobody shipped") == {
        "embedding": None,
        "embedding_model": None,
        "embedding_dim": None,
    }
