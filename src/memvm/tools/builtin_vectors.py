"""The built-in tools' vectors under the local model, computed ahead and shipped in
builtin_vectors.json: a new database's built-ins are then stored searchable by meaning at once, and the
embedding worker of a server that embeds nothing else with the local model never loads it (about
130 MiB of its memory from the start on, bench/README.md "Memory of the default `memvm serve`").

Each vector is keyed by the SHA-256 of the text it embeds (the tool's `search_text`): a built-in whose
text changed has none until the file is written again, and the embedding queue embeds it as before.
tests/unit/tools/test_builtin_vectors.py checks the file against the model, and rewrites it when
MEMVM_WRITE_BUILTIN_VECTORS=1.
"""

import base64
import functools
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from memvm.embeddings.local import DIM, MODEL_ID

VECTORS_FILE = Path(__file__).with_name("builtin_vectors.json")


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def encode_vector(vector: list[float]) -> str:
    """float32, little-endian, base64: the model's own numbers, exactly, in a quarter of JSON's size."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


@functools.cache
def _shipped() -> dict[str, tuple[float, ...]]:
    stored = json.loads(VECTORS_FILE.read_text())
    if stored["model"] != MODEL_ID or stored["dim"] != DIM:  # another local model: embed as any tool
        return {}
    return {key: struct.unpack(f"<{DIM}f", base64.b64decode(vector)) for key, vector in stored["vectors"].items()}


def stored_vector_columns(search_text: str) -> dict[str, Any]:
    """The embedding columns of a built-in whose text is `search_text`: its shipped vector, or none
    (NULL: the embedding queue embeds it)."""
    vector = _shipped().get(text_key(search_text))
    if vector is None:
        return {"embedding": None, "embedding_model": None, "embedding_dim": None}
    return {"embedding": list(vector), "embedding_model": MODEL_ID, "embedding_dim": DIM}
