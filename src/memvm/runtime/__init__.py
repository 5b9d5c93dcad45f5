"""Running agents: the agent loop (loop/), the model's tool calls (tools/), and the operations routes
call outside a turn that need what the loop holds (operations/). Each folder imports only the ones
after it in that order (the "Inside the runtime" contract in pyproject.toml)."""
