"""Tool search by meaning with the real offline model: Letta's test_tool_search_basic over HTTP,
and the embedding queue's handling of tools (an edit during embedding, built-ins kept at restart)."""

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.local import shared_local_embedder
from memvm.embeddings.registry import EmbedderRegistry
from memvm.search.embedding_queue import embed_pending
from memvm.tools import service as tools
from memvm.tools.schemas import ToolCreate, ToolUpdate
from tests.support.embedding import wait_embedded

EMAIL = '''
def send_email_to_user(recipient: str, subject: str, body: str) -> str:
    """Send an email message to a specified recipient.

    Args:
        recipient: Email address of the recipient
        subject: Subject line of the email
        body: Body content of the email message
    """
    return f"Email sent to {recipient}"
'''
WEATHER = '''
def fetch_weather_data(city: str, units: str = "celsius") -> str:
    """Fetch current weather information for a city.

    Args:
        city: Name of the city to get weather for
        units: Temperature units (celsius or fahrenheit)
    """
    return f"Weather in {city}: sunny, 25 {units}"
'''
INTEREST = '''
def calculate_compound_interest(principal: float, rate: float, years: int) -> float:
    """Calculate compound interest on an investment.

    Args:
        principal: Initial investment amount
        rate: Annual interest rate as decimal
        years: Number of years
    """
    return principal * (1 + rate) ** years
'''
LETTA_TOOLS = [
    (EMAIL, "Send an email message to a specified recipient with subject and body.", ["communication", "email"]),
    (WEATHER, "Fetch current weather information for a specified city.", ["weather", "api"]),
    (INTEREST, "Calculate compound interest on a financial investment over time.", ["finance", "calculator"]),
]


async def search(client, **body):
    found = await client.post("/v1/tools/search", json=body)
    assert found.status_code == 200, found.text
    return [hit["tool"]["name"] for hit in found.json()], found.json()


async def test_letta_tool_search_basic(client, db):
    for source, description, tags in LETTA_TOOLS:
        created = await client.post("/v1/tools/", json={"source_code": source, "description": description, "tags": tags})
        assert created.status_code == 200, created.text
    await wait_embedded(db, "tool")

    messaging, _ = await search(client, query="send message to someone", search_mode="hybrid", limit=10)
    weather, weather_hits = await search(client, query="get temperature forecast", search_mode="vector", limit=10)
    finance, _ = await search(client, query="money calculation", tags=["finance"], search_mode="hybrid", limit=10)
    remembering, _ = await search(client, query="remember a fact about the user", search_mode="vector", limit=1)

    assert "send_email_to_user" in messaging[:2] and "calculate_compound_interest" not in messaging  # with send_message
    assert weather[0] == "fetch_weather_data" and weather_hits[0]["vector_rank"] == 1 and weather_hits[0]["fts_rank"] is None
    assert finance == ["calculate_compound_interest"]
    assert "memory" in remembering[0], remembering  # built-ins are embedded too


class EditWhileEmbedding(EmbedderRegistry):
    """Edits the tool while its old text is being embedded, as a PATCH in another request would."""

    def __init__(self, sessionmaker, tool_id):
        super().__init__()
        self.sessionmaker, self.tool_id, self.local = sessionmaker, tool_id, shared_local_embedder()
        self.model, self.dim = self.local.model, self.local.dim

    def for_handle(self, handle):
        return self

    async def embed(self, texts):
        async with transaction(self.sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            await tools.update_tool(session, self.tool_id, ToolUpdate(description="Post a parcel."))
        return await self.local.embed(texts)


async def test_a_tool_edited_while_embedding_keeps_waiting_for_a_vector_of_its_new_text(db, sessionmaker):
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        tool_id = (await tools.create_tool(session, ToolCreate(source_code=EMAIL))).id

    assert await embed_pending(sessionmaker, EditWhileEmbedding(sessionmaker, tool_id)) == 1
    stale = await db.fetchrow("SELECT embedding IS NULL AS waiting, search_text, updated_at FROM tool WHERE id = $1", tool_id)
    assert await embed_pending(sessionmaker, EmbedderRegistry()) == 1
    fresh = await db.fetchrow("SELECT embedding IS NULL AS waiting, embed_attempts, updated_at FROM tool WHERE id = $1", tool_id)

    assert stale["waiting"] and "Post a parcel." in stale["search_text"]  # the old text's vector was not stored
    assert not fresh["waiting"] and fresh["embed_attempts"] == 1
    assert fresh["updated_at"] == stale["updated_at"]  # a vector is not an edit


async def test_a_restart_keeps_the_built_ins_vectors_and_stores_a_changed_ones_shipped_vector(db, sessionmaker):
    await db.execute("UPDATE tool SET description = 'an older description' WHERE name = 'send_message'")
    before = {row["name"]: row for row in await db.fetch("SELECT name, embedding, updated_at FROM tool")}

    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        await tools.sync_builtin_tools(session)
    after = {row["name"]: row for row in await db.fetch("SELECT name, embedding, updated_at, description FROM tool")}

    # computed ahead (tools/builtin_vectors.py): the worker need not load the local model for it
    assert after["send_message"]["embedding"] is not None and after["send_message"]["description"].startswith("Send a message")
    unchanged = [name for name in before if name != "send_message"]
    assert all(before[name]["embedding"] is not None for name in before)
    assert all(after[name]["embedding"] == before[name]["embedding"] for name in unchanged)
    assert all(after[name]["updated_at"] == before[name]["updated_at"] for name in unchanged)
