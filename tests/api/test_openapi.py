import re

# Every operation the routers in src/memvm/api/ define, written out so an added, removed or renamed route shows up here.
EXPECTED_OPERATIONS = {
    # health.py
    ("GET", "/v1/health/"),
    # agentfiles.py
    ("POST", "/v1/agents/import"),
    ("GET", "/v1/agents/{agent_id}/export"),
    # admin.py
    ("POST", "/v1/admin/api-keys"),
    ("GET", "/v1/admin/api-keys"),
    ("DELETE", "/v1/admin/api-keys/{key_id}"),
    ("GET", "/v1/admin/organizations"),
    # agents.py
    ("POST", "/v1/agents/"),
    ("GET", "/v1/agents/"),
    ("GET", "/v1/agents/{agent_id}"),
    ("PATCH", "/v1/agents/{agent_id}"),
    ("DELETE", "/v1/agents/{agent_id}"),
    ("POST", "/v1/agents/{agent_id}/recompile"),
    ("GET", "/v1/agents/{agent_id}/context"),
    ("POST", "/v1/agents/{agent_id}/summarize"),
    ("PATCH", "/v1/agents/{agent_id}/reset-messages"),
    ("GET", "/v1/agents/{agent_id}/secrets"),
    ("GET", "/v1/agents/{agent_id}/repositories"),
    # core_memory.py (its `{block_label:path}` routes are documented as `{block_label}`)
    ("GET", "/v1/agents/{agent_id}/core-memory/blocks"),
    ("GET", "/v1/agents/{agent_id}/core-memory/blocks/{block_label}"),
    ("PATCH", "/v1/agents/{agent_id}/core-memory/blocks/{block_label}"),
    ("PATCH", "/v1/agents/{agent_id}/core-memory/blocks/attach/{block_id}"),
    ("PATCH", "/v1/agents/{agent_id}/core-memory/blocks/detach/{block_id}"),
    # blocks.py
    ("POST", "/v1/blocks/"),
    ("GET", "/v1/blocks/"),
    ("GET", "/v1/blocks/{block_id}"),
    ("PATCH", "/v1/blocks/{block_id}"),
    ("DELETE", "/v1/blocks/{block_id}"),
    ("GET", "/v1/blocks/{block_id}/agents"),
    ("GET", "/v1/blocks/{block_id}/history"),
    ("GET", "/v1/blocks/{block_id}/versions/{version}"),
    ("POST", "/v1/blocks/{block_id}/undo"),
    ("POST", "/v1/blocks/{block_id}/redo"),
    ("POST", "/v1/blocks/{block_id}/restore"),
    ("GET", "/v1/agents/{agent_id}/core-memory/blocks/{block_label}/history"),
    # messages.py
    ("POST", "/v1/agents/{agent_id}/messages"),
    ("POST", "/v1/agents/{agent_id}/messages/stream"),
    ("POST", "/v1/agents/{agent_id}/messages/cancel"),
    ("POST", "/v1/agents/{agent_id}/messages/async"),
    ("GET", "/v1/agents/{agent_id}/messages"),
    ("GET", "/v1/messages/"),
    ("GET", "/v1/messages/{message_id}"),
    # tools.py
    ("GET", "/v1/tools/"),
    ("GET", "/v1/tools/count"),
    ("POST", "/v1/tools/"),
    ("PUT", "/v1/tools/"),
    ("POST", "/v1/tools/run"),
    ("POST", "/v1/tools/add-base-tools"),
    ("POST", "/v1/agents/{agent_id}/tools/{tool_name}/run"),
    ("POST", "/v1/tools/search"),
    ("PATCH", "/v1/tools/{tool_id}"),
    ("DELETE", "/v1/tools/{tool_id}"),
    ("GET", "/v1/tools/{tool_id}"),
    ("GET", "/v1/agents/{agent_id}/tools"),
    ("PATCH", "/v1/agents/{agent_id}/tools/attach/{tool_id}"),
    ("PATCH", "/v1/agents/{agent_id}/tools/detach/{tool_id}"),
    ("PATCH", "/v1/agents/{agent_id}/tools/approval/{tool_name}"),
    # conversations.py
    ("POST", "/v1/conversations/"),
    ("GET", "/v1/conversations/"),
    ("GET", "/v1/conversations/{conversation_id}"),
    ("PATCH", "/v1/conversations/{conversation_id}"),
    ("DELETE", "/v1/conversations/{conversation_id}"),
    ("POST", "/v1/conversations/{conversation_id}/messages"),
    ("GET", "/v1/conversations/{conversation_id}/messages"),
    ("POST", "/v1/conversations/{conversation_id}/stream"),
    ("POST", "/v1/conversations/{conversation_id}/cancel"),
    ("POST", "/v1/conversations/{conversation_id}/recompile"),
    ("POST", "/v1/conversations/{conversation_id}/compact"),
    ("POST", "/v1/conversations/{conversation_id}/fork"),
    # runs.py
    ("GET", "/v1/runs/"),
    ("GET", "/v1/runs/{run_id}"),
    ("DELETE", "/v1/runs/{run_id}"),
    ("GET", "/v1/runs/{run_id}/usage"),
    ("GET", "/v1/runs/{run_id}/messages"),
    ("GET", "/v1/runs/{run_id}/steps"),
    ("GET", "/v1/runs/{run_id}/trace"),
    ("POST", "/v1/runs/{run_id}/stream"),
    ("GET", "/v1/steps/"),
    ("GET", "/v1/steps/{step_id}"),
    ("GET", "/v1/steps/{step_id}/messages"),
    ("GET", "/v1/steps/{step_id}/metrics"),
    ("GET", "/v1/steps/{step_id}/trace"),
    ("PATCH", "/v1/steps/{step_id}/feedback"),
    # tags.py
    ("GET", "/v1/tags/"),
    # metrics.py
    ("GET", "/metrics"),
    # models.py
    ("GET", "/v1/models/"),
    ("GET", "/v1/models/embedding"),
    # archival.py
    ("POST", "/v1/agents/{agent_id}/archival-memory"),
    ("GET", "/v1/agents/{agent_id}/archival-memory"),
    ("GET", "/v1/agents/{agent_id}/archival-memory/search"),
    ("DELETE", "/v1/agents/{agent_id}/archival-memory/{memory_id}"),
    ("PATCH", "/v1/agents/{agent_id}/archives/attach/{archive_id}"),
    ("PATCH", "/v1/agents/{agent_id}/archives/detach/{archive_id}"),
    ("POST", "/v1/passages/search"),
    ("POST", "/v1/archives/"),
    ("GET", "/v1/archives/"),
    ("GET", "/v1/archives/{archive_id}"),
    ("PATCH", "/v1/archives/{archive_id}"),
    ("DELETE", "/v1/archives/{archive_id}"),
    ("GET", "/v1/archives/{archive_id}/agents"),
    ("POST", "/v1/archives/{archive_id}/passages"),
    ("POST", "/v1/archives/{archive_id}/passages/batch"),
    ("DELETE", "/v1/archives/{archive_id}/passages/{passage_id}"),
    # folders.py
    ("POST", "/v1/folders/"),
    ("GET", "/v1/folders/"),
    ("GET", "/v1/folders/{folder_id}"),
    ("PATCH", "/v1/folders/{folder_id}"),
    ("DELETE", "/v1/folders/{folder_id}"),
    ("GET", "/v1/folders/{folder_id}/agents"),
    ("GET", "/v1/agents/{agent_id}/folders"),
    ("PATCH", "/v1/agents/{agent_id}/folders/attach/{folder_id}"),
    ("PATCH", "/v1/agents/{agent_id}/folders/detach/{folder_id}"),
    ("POST", "/v1/folders/{folder_id}/upload"),
    ("GET", "/v1/folders/{folder_id}/files"),
    ("GET", "/v1/folders/{folder_id}/files/{file_id}"),
    ("DELETE", "/v1/folders/{folder_id}/{file_id}"),
    # embeddings.py
    ("POST", "/v1/embeddings"),
    # mcp_servers.py
    ("POST", "/v1/mcp-servers/"),
    ("GET", "/v1/mcp-servers/"),
    ("GET", "/v1/mcp-servers/{mcp_server_id}"),
    ("PATCH", "/v1/mcp-servers/{mcp_server_id}"),
    ("DELETE", "/v1/mcp-servers/{mcp_server_id}"),
    ("PATCH", "/v1/mcp-servers/{mcp_server_id}/refresh"),
    ("GET", "/v1/mcp-servers/{mcp_server_id}/tools"),
    ("GET", "/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}"),
    ("POST", "/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}/run"),
    ("GET", "/v1/agents/{agent_id}/mcp-servers"),
    ("GET", "/v1/agents/{agent_id}/mcp-servers/{mcp_server_id}/tools"),
    ("POST", "/v1/agents/{agent_id}/mcp-servers/tools/search"),
    ("POST", "/v1/agents/{agent_id}/mcp-servers/{mcp_server_id}/tools/{tool_id}/run"),
    # identities.py
    ("POST", "/v1/identities/"),
    ("PUT", "/v1/identities/"),
    ("GET", "/v1/identities/"),
    ("GET", "/v1/identities/count"),
    ("GET", "/v1/identities/{identity_id}"),
    ("PATCH", "/v1/identities/{identity_id}"),
    ("DELETE", "/v1/identities/{identity_id}"),
    ("PUT", "/v1/identities/{identity_id}/properties"),
    ("GET", "/v1/identities/{identity_id}/agents"),
    ("GET", "/v1/identities/{identity_id}/blocks"),
    ("PATCH", "/v1/agents/{agent_id}/identities/attach/{identity_id}"),
    ("PATCH", "/v1/agents/{agent_id}/identities/detach/{identity_id}"),
    ("PATCH", "/v1/blocks/{block_id}/identities/attach/{identity_id}"),
    ("PATCH", "/v1/blocks/{block_id}/identities/detach/{identity_id}"),
    # agent_files.py
    ("GET", "/v1/agents/{agent_id}/files"),
    ("PATCH", "/v1/agents/{agent_id}/files/close-all"),
    ("PATCH", "/v1/agents/{agent_id}/files/{file_id}/open"),
    ("PATCH", "/v1/agents/{agent_id}/files/{file_id}/close"),
    # search.py
    ("POST", "/v1/messages/search"),
    ("POST", "/v1/agents/messages/search"),
}


async def test_every_route_is_documented_with_a_description(client):
    spec = (await client.get("/openapi.json")).json()

    operations = [(path, method, op) for path, methods in spec["paths"].items() for method, op in methods.items()]

    assert {(method.upper(), path) for path, method, _ in operations} == EXPECTED_OPERATIONS
    undocumented = [f"{method.upper()} {path}" for path, method, op in operations if not op.get("description")]
    assert undocumented == []
    assert (await client.get("/docs")).status_code == 200


def _shapeless(answer: dict) -> bool:
    """A success answer whose body /openapi.json doesn't describe (FastAPI's `{}` for a bare dict or None)."""
    media = answer.get("content", {})
    return not media or any(not (kind.get("schema") or kind.get("itemSchema")) for kind in media.values())


async def test_every_success_answer_describes_its_body(client):
    spec = (await client.get("/openapi.json")).json()

    shapeless = [
        f"{method.upper()} {path} {status}"
        for path, methods in spec["paths"].items()
        for method, op in methods.items()
        for status, answer in op["responses"].items()
        if status.startswith("2") and status != "204" and _shapeless(answer)
    ]
    assert shapeless == []


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


async def test_error_answers_and_event_streams_are_documented_as_they_are_sent(client):
    """Schemathesis (tests/fuzz/) checks every answer against this document: errors are
    {"detail": "<sentence>"} (not FastAPI's list of validation errors) with their statuses, and the
    streaming routes answer text/event-stream."""
    spec = (await client.get("/openapi.json")).json()
    paths = spec["paths"]

    error = spec["components"]["schemas"]["ErrorBody"]
    assert error["properties"]["detail"]["type"] == "string" and error["required"] == ["detail"]
    for path, methods in paths.items():
        for method, operation in methods.items():
            documented = set(operation["responses"])
            if path == "/v1/health/":
                continue
            assert {"401", "404", "422", "503"} <= documented, (method, path)
            for status in documented - {"200", "204"}:
                content = operation["responses"][status]["content"]
                assert content == {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    assert "HTTPValidationError" not in spec["components"]["schemas"]

    for path in ("/v1/agents/{agent_id}/messages/stream", "/v1/runs/{run_id}/stream"):
        assert set(paths[path]["post"]["responses"]["200"]["content"]) == {"text/event-stream"}
    assert set(paths["/v1/agents/{agent_id}/messages"]["post"]["responses"]["200"]["content"]) == {
        "application/json",
        "text/event-stream",
    }
    stream = await client.post("/v1/runs/run-00000000-0000-4000-8000-000000000000/stream")
    assert stream.status_code == 404 and stream.headers["content-type"] == "application/json"


async def test_the_document_declares_the_api_key_schemes_and_the_open_health_route(client):
    spec = (await client.get("/openapi.json")).json()

    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer", "description": schemes["bearer"]["description"]}
    assert {key: schemes["bare_password"][key] for key in ("type", "in", "name")} == {
        "type": "apiKey",
        "in": "header",
        "name": "X-BARE-PASSWORD",
    }
    assert spec["security"] == [{"bearer": []}, {"bare_password": []}]  # either one, on every operation…
    operations = [(method, path, op) for path, methods in spec["paths"].items() for method, op in methods.items()]
    own = {(method, path): op["security"] for method, path, op in operations if "security" in op}
    assert own == {("get", "/v1/health/"): []}  # …but the health check, which needs none


def _template(path: str) -> re.Pattern[str]:
    """A documented path as the router matches it ({block_label} is a `:path` parameter: it may hold '/')."""
    pattern = re.sub(r"\{(\w+)\}", lambda m: "(.+)" if m.group(1) == "block_label" else "([^/]+)", path)
    return re.compile(f"^{pattern}$")


async def test_a_405_allows_every_method_the_path_serves(client):
    paths = (await client.get("/openapi.json")).json()["paths"]
    templates = {_template(path): {method.upper() for method in methods} for path, methods in paths.items()}

    for path in paths:
        concrete = re.sub(r"\{\w+\}", "x1", path)
        served = set().union(*(methods for template, methods in templates.items() if template.match(concrete)))
        refused = next(method for method in ("PUT", "DELETE", "PATCH", "POST", "GET") if method not in served)

        response = await client.request(refused, concrete)

        allowed = ", ".join(sorted(served))
        assert response.status_code == 405, (refused, concrete, response.status_code)
        assert response.headers["allow"] == allowed, (refused, concrete)
        assert response.json()["detail"] == f"{refused} is not allowed on {concrete}; it allows {allowed}."
