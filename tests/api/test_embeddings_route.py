"""POST /v1/embeddings: OpenAI's embeddings shape from memvm's local model, driven by the real
`openai` client (which asks for base64 by default), with the vectors memvm itself stores."""

import math

import numpy as np
import openai
import pytest

from memvm.embeddings.local import shared_local_embedder

MODEL = "local/all-MiniLM-L6-v2"


async def test_the_openai_client_gets_memvms_own_vectors(live_url):
    texts = ["Caroline went to a support group.", "Melanie paints sunrises."]
    async with openai.AsyncOpenAI(base_url=f"{live_url}/v1", api_key="unused") as client:
        as_base64 = await client.embeddings.create(model=MODEL, input=texts)  # the SDK's default: base64
        as_floats = await client.embeddings.create(model="all-MiniLM-L6-v2", input=texts[0], encoding_format="float")

    expected = await shared_local_embedder().embed(texts)
    assert [item.index for item in as_base64.data] == [0, 1]
    for item, vector in zip(as_base64.data, expected, strict=True):
        assert len(item.embedding) == 384 and np.allclose(item.embedding, vector, atol=1e-6)
    assert np.allclose(as_floats.data[0].embedding, expected[0], atol=1e-6)
    assert math.isclose(float(np.linalg.norm(as_floats.data[0].embedding)), 1.0, abs_tol=1e-4)
    assert as_base64.model == MODEL and 0 < as_floats.usage.prompt_tokens < as_base64.usage.prompt_tokens


async def test_usage_counts_the_tokens_the_model_read(client):
    long = "word " * 2000  # the model reads the first 256 tokens

    response = await client.post("/v1/embeddings", json={"input": long})

    assert response.status_code == 200, response.text
    assert response.json()["usage"] == {"prompt_tokens": 256, "total_tokens": 256}


@pytest.mark.parametrize(
    "body, fix",
    [
        ({"input": "hi", "model": "openai/text-embedding-3-small"}, "the only one is 'local/all-MiniLM-L6-v2'"),
        ({"input": "hi", "dimensions": 1536}, "384-dimensional"),
        ({"input": ""}, "at least 1 character"),
        ({"input": []}, "send 1 to 2048"),
        ({"input": ["x"] * 2049}, "send 1 to 2048"),
        ({"input": [[1, 2, 3]]}, "input"),
        ({"input": "hi", "encoding_format": "int8"}, "encoding_format"),
    ],
)
async def test_bad_input_is_a_4xx_that_says_what_to_fix(client, body, fix):
    response = await client.post("/v1/embeddings", json=body)

    assert response.status_code in (400, 422) and fix in response.text, response.text
