"""POST /v1/tools/search over HTTP, by full text (what the database decides at once; search by
meaning, which waits for the embedding worker, is in tests/search/test_tool_search.py): every
field a tool is searched by, the built-ins, the SDK's filters, refusals, and isolation."""

import pytest
from pydantic import SecretStr

from tests.support.api import app_client

EMAIL = '''
def send_email_to_user(recipient: str, subject: str) -> str:
    """Send an email message to a recipient.

    Args:
        recipient: Email address of the recipient.
        subject: Subject line of the email.
    """
    return f"sent to {recipient}"
'''
INTEREST = '''
def calculate_compound_interest(principal: float, rate: float) -> float:
    """Calculate compound interest on an investment.

    Args:
        principal: Initial amount.
        rate: Annual rate as a decimal.
    """
    growth = 1 + rate  # the zeppelin constant
    return principal * growth
'''
ADMIN_KEY = "admin-secret-for-tool-search"


@pytest.fixture
async def quiet_client(settings):
    """No embedding worker: the results depend on the full text alone."""
    async with app_client(settings.model_copy(update={"embedding_worker": False})) as client:
        yield client


async def create(client, source, **fields):
    created = await client.post("/v1/tools/", json={"source_code": source, **fields})
    assert created.status_code == 200, created.text
    return created.json()


async def search(client, **body):
    found = await client.post("/v1/tools/search", json=body)
    assert found.status_code == 200, found.text
    return found.json()


def names(results):
    return [result["tool"]["name"] for result in results]


async def test_finds_tools_by_name_description_parameters_tags_and_source(quiet_client):
    email = await create(quiet_client, EMAIL, tags=["communication"])
    await create(quiet_client, INTEREST, tags=["finance"])

    by_name = await search(quiet_client, query="send_email_to_user", search_mode="fts")
    by_description = await search(quiet_client, query="investment", search_mode="fts")
    by_parameter = await search(quiet_client, query="subject", search_mode="fts")
    by_tag = await search(quiet_client, query="communication", search_mode="fts")
    by_source = await search(quiet_client, query="zeppelin", search_mode="fts")

    assert names(by_name)[0] == "send_email_to_user"
    assert names(by_description) == ["calculate_compound_interest"]
    assert names(by_parameter) == ["send_email_to_user"]
    assert names(by_tag) == ["send_email_to_user"]
    assert names(by_source) == ["calculate_compound_interest"]
    [hit] = by_parameter
    assert hit["tool"] == email and hit["fts_rank"] == 1 and hit["vector_rank"] is None
    assert isinstance(hit["combined_score"], float) and hit["combined_score"] > 0
    assert hit["embedded_text"].startswith("send_email_to_user\nSend an email message to a recipient.")
    assert "Tags: communication" in hit["embedded_text"]


async def test_a_name_outranks_a_mention_in_the_source(quiet_client):
    await create(quiet_client, INTEREST.replace("the zeppelin constant", "like an email would"))
    await create(quiet_client, EMAIL)

    assert names(await search(quiet_client, query="email", search_mode="fts")) == [
        "send_email_to_user",
        "calculate_compound_interest",
    ]


async def test_built_in_tools_are_found_and_filtered_like_custom_ones(quiet_client):
    await create(quiet_client, EMAIL.replace("an email message", "a memory"), tags=["mine"])

    memory = names(await search(quiet_client, query="memory", search_mode="fts"))
    core_only = await search(quiet_client, query="memory", search_mode="fts", tool_types=["letta_memory_core"])
    custom_only = names(await search(quiet_client, query="memory", search_mode="fts", tool_types=["custom"]))
    tagged = names(await search(quiet_client, query="memory", search_mode="fts", tags=["mine", "absent"]))
    first_two = names(await search(quiet_client, query="memory", search_mode="fts", limit=2))

    assert {"memory", "memory_replace", "memory_insert", "core_memory_append", "send_email_to_user"} <= set(memory)
    assert core_only and {hit["tool"]["tool_type"] for hit in core_only} == {"letta_memory_core"}
    assert custom_only == tagged == ["send_email_to_user"]
    assert first_two == memory[:2]


async def test_no_query_lists_the_matching_tools_newest_first(quiet_client):
    first = await create(quiet_client, EMAIL, tags=["mine"])
    second = await create(quiet_client, INTEREST, tags=["mine"])

    listed = await search(quiet_client, tags=["mine"])
    blank = await search(quiet_client, query="  ", tool_types=["custom"], limit=1)

    assert [hit["tool"]["id"] for hit in listed] == [second["id"], first["id"]]
    assert {(hit["combined_score"], hit["fts_rank"], hit["vector_rank"]) for hit in listed} == {(0.0, None, None)}
    assert names(blank) == ["calculate_compound_interest"]


async def test_an_edit_is_searchable_at_once(quiet_client):
    tool = await create(quiet_client, EMAIL)

    edited = await quiet_client.patch(f"/v1/tools/{tool['id']}", json={"description": "Post a parcel.", "tags": ["mail"]})

    assert edited.status_code == 200, edited.text
    assert names(await search(quiet_client, query="parcel", search_mode="fts")) == ["send_email_to_user"]
    assert names(await search(quiet_client, query="mail", search_mode="fts", tags=["mail"])) == ["send_email_to_user"]
    assert await search(quiet_client, query="recipient message", search_mode="fts", tool_types=["custom"]) != []
    assert await search(quiet_client, query="investment", search_mode="fts") == []


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"query": "x", "search_mode": "semantic"}, "search_mode"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "tags": "finance"}, "tags"),
        ({"query": "x", "tool_types": [1]}, "tool_types"),
        ({"query": "x", "exclude_tool_types": ["custom"]}, "exclude_tool_types"),
        ({"query": ["x"]}, "query"),
    ],
)
async def test_bad_requests_are_422_naming_the_field(quiet_client, body, named):
    refused = await quiet_client.post("/v1/tools/search", json=body)

    assert refused.status_code == 422 and named in refused.text, refused.text


async def test_another_organizations_tools_are_never_found(settings):
    async with app_client(
        settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY), "embedding_worker": False})
    ) as client:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        keys = {}
        for organization in ("a", "b"):
            created = await client.post("/v1/admin/api-keys", json={"organization": organization}, headers=admin)
            keys[organization] = {"Authorization": f"Bearer {created.json()['key']}"}
        made = await client.post("/v1/tools/", json={"source_code": EMAIL}, headers=keys["a"])
        assert made.status_code == 200, made.text

        seen = {
            organization: [
                (await client.post("/v1/tools/search", json=body, headers=headers)).json()
                for body in ({"query": "email recipient"}, {"query": "email", "search_mode": "fts"}, {"tool_types": ["custom"]})
            ]
            for organization, headers in keys.items()
        }

    assert all("send_email_to_user" in names(found) for found in seen["a"])
    assert all("send_email_to_user" not in names(found) for found in seen["b"])
    assert seen["b"][1:] == [[], []] and len(seen["b"][0]) > 0  # hybrid: the built-ins, nearest by meaning


@pytest.mark.parametrize("query", ["it's a:* & b | !c (d)", "the of and", "'\\\\'", "ünïcödé 🔧 email", "x" * 20_000])
async def test_any_text_is_a_query(quiet_client, query):
    await create(quiet_client, EMAIL)

    for mode in ("hybrid", "fts", "vector"):
        found = await quiet_client.post("/v1/tools/search", json={"query": query, "search_mode": mode, "tool_types": ["custom"]})
        assert found.status_code == 200, found.text
