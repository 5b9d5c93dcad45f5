async def test_every_route_is_documented_with_a_description(client):
    spec = (await client.get("/openapi.json")).json()

    operations = [(path, method, op) for path, methods in spec["paths"].items() for method, op in methods.items()]

    assert len(operations) >= 18
    undocumented = [f"{method.upper()} {path}" for path, method, op in operations if not op.get("description")]
    assert undocumented == []
    assert (await client.get("/docs")).status_code == 200


async def test_letta_paths_are_served(client):
    paths = (await client.get("/openapi.json")).json()["paths"]

    for path in (
        "/v1/health/",
        "/v1/agents/",
        "/v1/agents/{agent_id}",
        "/v1/agents/{agent_id}/recompile",
        "/v1/agents/{agent_id}/core-memory/blocks",
        "/v1/agents/{agent_id}/core-memory/blocks/{block_label}",
        "/v1/agents/{agent_id}/core-memory/blocks/attach/{block_id}",
        "/v1/agents/{agent_id}/core-memory/blocks/detach/{block_id}",
        "/v1/blocks/",
        "/v1/blocks/{block_id}",
        "/v1/blocks/{block_id}/agents",
    ):
        assert path in paths, path
