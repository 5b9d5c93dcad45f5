"""Agent files (.af): import and export agents in Letta's format."""
