"""Built-in tools: their specs, the default sets per agent type, and the executor."""
