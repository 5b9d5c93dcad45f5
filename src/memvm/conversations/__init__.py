"""Conversations: many threads per agent, each with its own history, window and runs, over the
agent's shared memory (blocks, archives, tools, rules). The agent's own history is its default
conversation, addressed as `default` with the agent's id."""
