"""Quickstart: a stateful agent through the official Letta Python SDK (`pip install letta-client`).

The same script runs against a Letta server or memvm; only the base URL (and key) differ.

    memvm serve                                  # listens on http://127.0.0.1:8283
    MEMVM_URL=http://127.0.0.1:8283 MEMVM_MODEL=openai/gpt-4o-mini python examples/sdk_quickstart.py

A server with keys (MEMVM_ADMIN_API_KEY, or `memvm keys create --org NAME`) wants one: set MEMVM_API_KEY.
"""

import os

from letta_client import Letta

client = Letta(base_url=os.environ.get("MEMVM_URL", "http://127.0.0.1:8283"), api_key=os.environ.get("MEMVM_API_KEY"))
model = os.environ.get("MEMVM_MODEL", "openai/gpt-4o-mini")

# 1. An agent with two core-memory blocks: always in its prompt, and editable by the agent itself.
agent = client.agents.create(
    name="quickstart",
    model=model,
    memory_blocks=[
        {"label": "human", "value": "Name: Ada"},
        {"label": "persona", "value": "I am a friendly assistant who remembers what people tell me."},
    ],
)
print(f"Created agent {agent.id} ({agent.model})")

# 2. Archival memory: an unbounded store the agent searches by meaning when it needs to.
[passage] = client.agents.passages.create(
    agent.id, text="Ada wrote the first published computer program, for the Analytical Engine.", tags=["bio"]
)
print(f"Stored archival passage {passage.id}")

# 3. Talk to the agent, streaming each step (tool calls, their results, the answer) as it happens.
print("Streaming a reply:")
stream = client.agents.messages.create(
    agent.id,
    messages=[{"role": "user", "content": "Please remember my full name: Ada Lovelace."}],
    streaming=True,
)
for chunk in stream:
    kind = chunk.message_type
    if kind == "ping":
        continue
    if kind == "tool_call_message":
        detail = f"{chunk.tool_call.name}({chunk.tool_call.arguments})"
    elif kind == "tool_return_message":
        detail = chunk.status
    elif kind == "assistant_message":
        detail = chunk.content if isinstance(chunk.content, str) else "".join(part.text for part in chunk.content)
    elif kind == "reasoning_message":
        detail = chunk.reasoning
    elif kind == "stop_reason":
        detail = chunk.stop_reason
    elif kind == "usage_statistics":
        detail = f"{chunk.step_count} steps, {chunk.total_tokens} tokens"
    else:
        detail = ""
    print(f"  [{kind}] {detail}")

# 4. Read the memory back: the agent may have edited its `human` block during the turn.
human = client.agents.blocks.retrieve("human", agent_id=agent.id)
print(f"Human block: {human.value}")
print("Memory:")
for block in client.agents.blocks.list(agent.id):
    print(f"  {block.label}: {block.value}")
