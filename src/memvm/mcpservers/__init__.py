"""MCP servers: an organization's tool sources, their secrets and the tools they bring."""
