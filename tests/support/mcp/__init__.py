"""MCP servers for the port's tests, built with the SDK's own server side (and one that is not MCP)."""
