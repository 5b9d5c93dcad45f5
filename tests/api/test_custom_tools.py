"""Custom tools as a catalog: made from Python source (schema derived, source never run), per
organization, editable, deletable, attachable by id or name; built-ins read-only."""

from dataclasses import replace

from tests.support.api import create_agent, keyed_client, started_app_client

WEATHER = '''
def get_weather(city: str, units: str = "metric") -> str:
    """Tell the weather in a city.

    Args:
        city: Name of the city.
        units: metric or imperial.
    """
    return f"Sunny in {city}"
'''
WEATHER_V2 = WEATHER.replace("Tell the weather in a city.", "Forecast for a city.").replace(
    'units: str = "metric"', "units: str, days: int = 1"
)


async def test_create_derives_the_schema_and_lists_by_filters(client):
    created = await client.post("/v1/tools/", json={"source_code": WEATHER, "tags": ["weather"]})
    tool = created.json()

    assert created.status_code == 200, created.text
    assert tool["name"] == "get_weather" and tool["tool_type"] == "custom" and tool["source_type"] == "python"
    assert tool["description"] == "Tell the weather in a city."
    assert tool["json_schema"]["parameters"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Name of the city."},
            "units": {"type": "string", "description": "metric or imperial."},
        },
        "required": ["city"],
    }
    by_type = (await client.get("/v1/tools/", params={"tool_types": "custom"})).json()
    by_search = (await client.get("/v1/tools/", params={"search": "WEATH"})).json()
    by_names = (await client.get("/v1/tools/", params=[("names", "get_weather"), ("names", "send_message")])).json()
    count = (await client.get("/v1/tools/count", params={"exclude_tool_types": "custom"})).json()
    everything = (await client.get("/v1/tools/count")).json()
    assert [t["id"] for t in by_type] == [tool["id"]] and [t["id"] for t in by_search] == [tool["id"]]
    assert sorted(t["name"] for t in by_names) == ["get_weather", "send_message"]
    assert everything == count + 1 and count >= 12


async def test_bad_source_is_a_400_that_says_what_to_fix_and_stores_nothing(client, db):
    before = await db.fetchval("SELECT count(*) FROM tool")
    missing_type = await client.post("/v1/tools/", json={"source_code": "def f(city):\n    return city"})
    syntax = await client.post("/v1/tools/", json={"source_code": "def f(:"})
    no_function = await client.post("/v1/tools/", json={"source_code": "x = 1"})
    builtin_name = await client.post(
        "/v1/tools/", json={"source_code": "def send_message(message: str) -> str:\n    return message"}
    )
    bad_schema = await client.post("/v1/tools/", json={"source_code": WEATHER, "json_schema": {"parameters": {}}})

    assert missing_type.status_code == 400 and "'city' of 'f' has no type annotation" in missing_type.json()["detail"]
    assert syntax.status_code == 400 and "not valid Python" in syntax.json()["detail"]
    assert no_function.status_code == 400 and "defines no function" in no_function.json()["detail"]
    assert builtin_name.status_code == 409 and "built-in tool" in builtin_name.json()["detail"]
    assert bad_schema.status_code == 400 and "string `name`" in bad_schema.json()["detail"]
    assert await db.fetchval("SELECT count(*) FROM tool") == before


async def test_names_are_unique_per_organization_and_put_replaces(client):
    first = (await client.post("/v1/tools/", json={"source_code": WEATHER})).json()
    again = await client.post("/v1/tools/", json={"source_code": WEATHER})
    replaced = await client.put("/v1/tools/", json={"source_code": WEATHER_V2, "return_char_limit": 500})

    assert again.status_code == 409 and "PUT /v1/tools/" in again.json()["detail"]
    assert replaced.status_code == 200 and replaced.json()["id"] == first["id"]
    assert replaced.json()["description"] == "Forecast for a city." and replaced.json()["return_char_limit"] == 500
    assert replaced.json()["json_schema"]["parameters"]["required"] == ["city", "units"]


async def test_patch_rederives_from_new_source_and_delete_removes(client):
    tool = (await client.post("/v1/tools/", json={"source_code": WEATHER})).json()

    patched = await client.patch(f"/v1/tools/{tool['id']}", json={"source_code": WEATHER_V2, "metadata_": {"owner": "ops"}})
    deleted = await client.delete(f"/v1/tools/{tool['id']}")
    gone = await client.get(f"/v1/tools/{tool['id']}")

    assert patched.status_code == 200 and "days" in patched.json()["json_schema"]["parameters"]["properties"]
    assert patched.json()["metadata"] == {"owner": "ops"}
    assert deleted.status_code == 204 and gone.status_code == 404


async def test_create_and_put_store_the_metadata_the_network_opt_in_lives_in(client):
    network = {"sandbox": {"network": True}}
    created = (await client.post("/v1/tools/", json={"source_code": WEATHER, "metadata": network})).json()
    kept = (await client.put("/v1/tools/", json={"source_code": WEATHER_V2})).json()
    replaced = (await client.put("/v1/tools/", json={"source_code": WEATHER, "metadata_": {"owner": "ops"}})).json()

    assert created["metadata"] == network and kept["metadata"] == network
    assert replaced["metadata"] == {"owner": "ops"}


async def test_builtin_tools_are_read_only(client):
    builtin = (await client.get("/v1/tools/", params={"name": "memory_replace"})).json()[0]

    patched = await client.patch(f"/v1/tools/{builtin['id']}", json={"description": "mine now"})
    deleted = await client.delete(f"/v1/tools/{builtin['id']}")

    assert patched.status_code == 403 and deleted.status_code == 403 and "built in" in patched.json()["detail"]
    assert (await client.get(f"/v1/tools/{builtin['id']}")).json()["description"] == builtin["description"]


async def test_custom_tools_attach_by_id_and_by_name_at_creation(client):
    tool = (await client.post("/v1/tools/", json={"source_code": WEATHER})).json()
    agent = await create_agent(client)

    attached = await client.patch(f"/v1/agents/{agent['id']}/tools/attach/{tool['id']}")
    created = await client.post("/v1/agents/", json={"tools": ["get_weather"], "model": "openai/scripted-model"})

    assert attached.status_code == 200 and created.status_code == 200, created.text
    for agent_id in (agent["id"], created.json()["id"]):
        names = [t["name"] for t in (await client.get(f"/v1/agents/{agent_id}/tools")).json()]
        assert "get_weather" in names


async def test_tools_named_and_given_by_id_at_creation_come_once_in_order_as_reading_back_gives(client):
    # The defaults, then the names, then the ids; memory_insert, a default also given by id, once.
    tool = (await client.post("/v1/tools/", json={"source_code": WEATHER})).json()
    memory_insert = (await client.get("/v1/tools/", params={"name": "memory_insert"})).json()[0]
    body = {"tools": ["archival_memory_search"], "tool_ids": [tool["id"], memory_insert["id"]], "model": "openai/scripted-model"}

    created = (await client.post("/v1/agents/", json=body)).json()
    fetched = (await client.get(f"/v1/agents/{created['id']}")).json()

    names = ["conversation_search", "memory_replace", "memory_insert", "archival_memory_search", "get_weather"]
    assert [t["name"] for t in created["tools"]] == names
    assert created["tools"] == fetched["tools"]


async def test_an_unknown_tool_name_or_id_at_creation_is_refused_and_creates_nothing(client, db):
    by_name = await client.post("/v1/agents/", json={"tools": ["memory_insert", "no_such_tool"]})
    by_id = await client.post("/v1/agents/", json={"tool_ids": ["tool-00000000-0000-4000-8000-000000000000"]})

    assert by_name.status_code == 400 and "no_such_tool" in by_name.json()["detail"]
    assert by_id.status_code == 404 and "tool-00000000-0000-4000-8000-000000000000" in by_id.json()["detail"]
    assert await db.fetchval("SELECT count(*) FROM agent") == 0
    assert await db.fetchval("SELECT count(*) FROM agent_tool") == 0


async def test_another_organizations_tool_cannot_be_attached_at_creation(settings, db):
    async with keyed_client(settings, "a", "b") as (client, (key_a, key_b)):
        tool = (await client.post("/v1/tools/", json={"source_code": WEATHER}, headers=key_a)).json()
        by_name = await client.post("/v1/agents/", json={"tools": [tool["name"]]}, headers=key_b)
        by_id = await client.post("/v1/agents/", json={"tool_ids": [tool["id"]]}, headers=key_b)

    assert by_name.status_code == 400 and by_id.status_code == 404
    assert await db.fetchval("SELECT count(*) FROM agent_tool WHERE tool_id = $1", tool["id"]) == 0


class RecordingSandbox:
    """Stands in for the sandbox when only what it is asked matters: the venvs to build (none is built)."""

    def __init__(self) -> None:
        self.prepared: list[tuple[str, ...]] = []

    def prepare(self, requirements: tuple[str, ...]) -> None:
        self.prepared.append(requirements)


async def test_saving_a_tool_with_requirements_starts_building_its_venv(settings):
    """So that the tool's first call need not wait for pip: create, patch and put hand the
    requirements to the sandbox once they are stored; a tool without requirements asks for nothing."""
    sandbox = RecordingSandbox()

    async with started_app_client(settings) as (app, client):
        app.state.runtime = replace(app.state.runtime, sandbox=sandbox)
        created = (await client.post("/v1/tools/", json={"source_code": WEATHER})).json()
        after_create = list(sandbox.prepared)
        pinned = [{"name": "requests", "version": "2.32.3"}, {"name": "pyyaml"}]
        patched = await client.patch(f"/v1/tools/{created['id']}", json={"pip_requirements": pinned})
        put = await client.put("/v1/tools/", json={"source_code": WEATHER, "pip_requirements": [{"name": "rich"}]})

    assert patched.status_code == 200 and put.status_code == 200, (patched.text, put.text)
    assert after_create == []
    assert sandbox.prepared == [("requests==2.32.3", "pyyaml"), ("rich",)]
