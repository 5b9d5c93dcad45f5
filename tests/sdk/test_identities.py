"""Identities through the official SDK against a real `memvm serve`. letta-client 1.12.1 has no
identities resource of its own: it attaches and detaches identities (agents.identities), sets them
with identity_ids on agents.create and agents.update, reads AgentState.identities and filters
agents.list and blocks.list by identity. The /v1/identities/ routes it does not wrap are driven
through the client's own request methods, typed with the SDK's Identity. Bad input is in
tests/api/test_identities.py."""

import pytest
from letta_client import AsyncLetta, NotFoundError, UnprocessableEntityError
from letta_client.types.agent_state import Identity

from tests.support.sdk import MISSING_AGENT, new_agent, unique

MISSING_IDENTITY = "identity-00000000-0000-4000-8000-000000000000"


async def create_identity(letta: AsyncLetta, key: str, **fields) -> Identity:
    body = {"identifier_key": key, "name": "Bob", "identity_type": "user", **fields}
    return await letta.post("/v1/identities/", body=body, cast_to=Identity)


async def test_identity_routes_answer_in_the_sdk_s_identity_shape(letta: AsyncLetta):
    key = unique("user")
    agent = await new_agent(letta)
    created = await create_identity(letta, key, properties=[{"key": "plan", "value": "pro", "type": "string"}])

    upserted = await letta.put(
        "/v1/identities/",
        body={"identifier_key": key, "name": "Robert", "identity_type": "user", "agent_ids": [agent.id]},
        cast_to=Identity,
    )
    fetched = await letta.get(f"/v1/identities/{created.id}", cast_to=Identity)
    listed = await letta.get(f"/v1/identities/?identifier_key={key}", cast_to=list[Identity])
    patched = await letta.patch(f"/v1/identities/{created.id}", body={"name": "Rob"}, cast_to=Identity)
    await letta.delete(f"/v1/identities/{created.id}", cast_to=object)

    assert created.id.startswith("identity-") and created.properties and created.properties[0].value == "pro"
    assert (upserted.id, upserted.name, upserted.agent_ids) == (created.id, "Robert", [agent.id])
    assert upserted.properties == created.properties  # not given: kept, as Letta
    assert fetched == upserted and listed == [upserted] and patched.name == "Rob"
    with pytest.raises(NotFoundError):
        await letta.get(f"/v1/identities/{created.id}", cast_to=Identity)


async def test_agents_identities_attach_and_detach(letta: AsyncLetta):
    agent = await new_agent(letta)
    identity = await create_identity(letta, unique("user"))

    await letta.agents.identities.attach(identity.id, agent_id=agent.id)
    attached = await letta.agents.retrieve(agent.id, include=["agent.identities"])
    await letta.agents.identities.detach(identity.id, agent_id=agent.id)
    detached = await letta.agents.retrieve(agent.id, include=["agent.identities"])

    assert attached.identities and [(i.id, i.identifier_key, i.agent_ids) for i in attached.identities] == [
        (identity.id, identity.identifier_key, [agent.id])
    ]
    assert attached.identity_ids == [identity.id]
    assert (detached.identities, detached.identity_ids) == ([], [])
    with pytest.raises(NotFoundError):
        await letta.agents.identities.attach(MISSING_IDENTITY, agent_id=agent.id)
    with pytest.raises(NotFoundError):
        await letta.agents.identities.detach(identity.id, agent_id=MISSING_AGENT)
    with pytest.raises(UnprocessableEntityError):
        await letta.agents.identities.attach("not-an-identity", agent_id=agent.id)


async def test_identity_ids_on_create_and_update_and_the_list_filters(letta: AsyncLetta):
    one, two = await create_identity(letta, unique("one")), await create_identity(letta, unique("two"))
    agent = await new_agent(letta, identity_ids=[one.id])
    other = await new_agent(letta, identity_ids=[two.id])
    block = await letta.blocks.create(label="team", value="plans")
    await letta.put(f"/v1/identities/{one.id}/properties", body=[], cast_to=Identity)
    await letta.patch(f"/v1/identities/{two.id}", body={"block_ids": [block.id]}, cast_to=Identity)

    by_one = [found.id async for found in letta.agents.list(identity_id=one.id)]
    by_keys = {found.id async for found in letta.agents.list(identifier_keys=[one.identifier_key, two.identifier_key])}
    updated = await letta.agents.update(agent.id, identity_ids=[two.id])
    by_two = {found.id async for found in letta.agents.list(identity_id=two.id, include=["agent.identities"])}
    blocks = [found.id async for found in letta.blocks.list(identity_id=two.id)]

    assert (agent.identity_ids, by_one, by_keys) == ([one.id], [agent.id], {agent.id, other.id})
    assert updated.identity_ids == [two.id] and by_two == {agent.id, other.id}
    assert blocks == [block.id]
