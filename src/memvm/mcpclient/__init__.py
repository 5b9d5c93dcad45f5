"""The MCP client port: long-lived sessions to MCP servers (stdio servers in the tool sandbox's
jail, SSE and streamable HTTP ones over the network), spoken with the official `mcp` SDK, each
step under a timeout."""
