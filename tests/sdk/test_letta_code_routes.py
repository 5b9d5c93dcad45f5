"""What Letta Code calls besides conversations, through letta-client 1.12.1. The SDK has no methods
for these routes, so they go through its own request methods (`get`/`post` with `cast_to`), as an
SDK user would call them; the answers parse into the SDK's types."""

from typing import Any

from letta_client import AsyncLetta
from letta_client.types import AgentEnvironmentVariable, Tool

from tests.support.sdk import new_agent


async def test_the_sdk_reads_an_agents_secrets_mcp_servers_and_repositories(letta: AsyncLetta):
    agent = await new_agent(letta, secrets={"TOKEN": "s3cret"})

    secrets = await letta.get(f"/v1/agents/{agent.id}/secrets", cast_to=list[AgentEnvironmentVariable])
    servers = await letta.get(f"/v1/agents/{agent.id}/mcp-servers", cast_to=list[dict[str, Any]])
    repositories = await letta.get(f"/v1/agents/{agent.id}/repositories", cast_to=dict[str, Any])

    assert [(secret.key, secret.value) for secret in secrets] == [("TOKEN", "********")]
    assert servers == [] and repositories == {"repositories": []}


async def test_the_sdk_adds_base_tools_and_creates_an_agent_with_the_web_tools(letta: AsyncLetta):
    base = await letta.post("/v1/tools/add-base-tools", cast_to=list[Tool])
    agent = await new_agent(letta, tools=["web_search", "fetch_webpage"])

    assert {"send_message", "conversation_search", "web_search", "fetch_webpage"} <= {tool.name for tool in base}
    assert {tool.name for tool in agent.tools} >= {"web_search", "fetch_webpage"}
